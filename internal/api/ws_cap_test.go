package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsServe serves srv's routes; it returns the WebSocket URL.
func wsServe(t testing.TB, srv *Server) string {
	t.Helper()
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/v1/ws"
}

// TestWebSocketCap: past MaxWebSockets the next WebSocket is answered 503, and a closed one
// makes room again (issue 31 N5: WebSockets used to be bounded only by the connection cap).
func TestWebSocketCap(t *testing.T) {
	srv := historyServer(t, 0)
	srv.MaxWebSockets = 2
	url := wsServe(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var open []*websocket.Conn
	for range 2 {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		open = append(open, c)
	}
	if _, resp, err := websocket.Dial(ctx, url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third WebSocket with a cap of 2: %v, %v; want 503", resp, err)
	}
	open[0].Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err == nil {
			c.CloseNow()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a WebSocket closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkWSConnMemory reports the heap each WebSocket keeps once it has received a
// compressed history and updates (the client offers permessage-deflate with context
// takeover): heapB/conn. With the server's context takeover (before issue 31 N5) each held a
// flate compressor. Both ends run in this process: the figure counts the client's part too.
func BenchmarkWSConnMemory(b *testing.B) {
	const conns = 32
	srv := historyServer(b, 0)
	url := wsServe(b, srv)
	ctx := context.Background()
	var per float64
	for b.Loop() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC() // twice: the first leaves sync.Pool's victims (pooled compressors) live
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		var cs []*websocket.Conn
		for range conns {
			c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"a","history":"1m"}`)); err != nil {
				b.Fatal(err)
			}
			for range 2 { // the history and the first update
				if _, _, err := c.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		per = float64(int64(ms.HeapAlloc)-int64(before)) / conns
		for _, c := range cs {
			c.CloseNow()
		}
		for srv.wsOpen.Load() > 0 { // the server's ends gone before the next measurement
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(per, "heapB/conn")
}
