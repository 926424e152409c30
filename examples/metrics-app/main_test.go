package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/shm"
)

func TestApp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "metrics-app")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, base, false) }()
	url := "http://" + ln.Addr().String()
	for range 3 {
		resp, err := http.Get(url + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(url + "/metrics/snapshot?timeout=1secs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var snap map[string]float64
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatalf("snapshot %s: %v", body, err)
	}
	if snap["http/requests"] != 3 || snap["http/latency_ms/count"] != 3 || snap["runtime/goroutines"] < 1 {
		t.Errorf("snapshot = %v; want 3 requests timed and a goroutine count", snap)
	}
	// The mirror publishes within a second or so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := shm.NewReader(base, shm.ReaderOptions{})
		s, err := r.Read()
		r.Close()
		if err == nil && len(s.Layout.Entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror never published at %s: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base + ".meta"); !os.IsNotExist(err) {
		t.Errorf("files left after exit: %v", err)
	}
}
