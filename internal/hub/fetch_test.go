package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFanOutBounded: FanOut asks every member that is up, never more than par at once, and
// answers "peer is down" for the others without asking them.
func TestFanOutBounded(t *testing.T) {
	var members []Member
	for i := range 12 {
		members = append(members, Member{Name: string(rune('a' + i)), HTTP: "h:1", Up: i%4 != 3})
	}
	members[0].HTTP = ""
	var now, most, asked atomic.Int32
	release := make(chan struct{})
	go func() {
		// Let the goroutines pile up on the bound before any finishes.
		deadline := time.Now().Add(5 * time.Second)
		for now.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	errs := FanOut(context.Background(), members, 3, func(_ context.Context, i int, m Member) error {
		n := now.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		asked.Add(1)
		<-release
		now.Add(-1)
		return nil
	})
	if most.Load() > 3 {
		t.Errorf("%d calls at once; want at most 3", most.Load())
	}
	for i, m := range members {
		down := m.HTTP == "" || !m.Up
		if down && (errs[i] == nil || errs[i].Error() != "peer is down") || !down && errs[i] != nil {
			t.Errorf("member %d (%+v): error %v", i, m, errs[i])
		}
	}
	if asked.Load() != 8 {
		t.Errorf("%d members asked; want the 8 that are up", asked.Load())
	}
}

// TestFetcherGet: a 200 answer's body; another status a StatusError with its body; an answer
// over the limit ErrTooLarge.
func TestFetcherGet(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"a":1}`))
		case "/big":
			w.Write([]byte(strings.Repeat("x", 100)))
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer ts.Close()
	f := &Fetcher{Timeout: time.Second}
	m := Member{Name: "p", HTTP: strings.TrimPrefix(ts.URL, "http://"), Up: true}
	ctx := context.Background()
	if b, err := f.Get(ctx, m, "/ok", 10); err != nil || string(b) != `{"a":1}` {
		t.Errorf("/ok: %q, %v", b, err)
	}
	var se StatusError
	if _, err := f.Get(ctx, m, "/nope", 10); !errors.As(err, &se) || !strings.HasPrefix(se.Status, "404") || strings.TrimSpace(string(se.Body)) != "no" {
		t.Errorf("/nope: %v; want a 404 StatusError with its body", err)
	}
	var tl ErrTooLarge
	if _, err := f.Get(ctx, m, "/big", 99); !errors.As(err, &tl) || tl.Limit != 99 {
		t.Errorf("/big: %v; want ErrTooLarge{99}", err)
	}
	if _, err := f.Get(ctx, Member{HTTP: m.HTTP}, "/ok", 10); err == nil || err.Error() != "peer is down" {
		t.Errorf("a member that is down: %v; want peer is down", err)
	}
}

// TestFetcherKeepAliveOneConnectionPerPeer: with KeepAlive, requests to a peer, one after
// another and many at once, all go over one connection: it is opened once, never two at a
// time, and every request is answered.
func TestFetcherKeepAliveOneConnectionPerPeer(t *testing.T) {
	var opened, open, most atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok " + r.URL.Query().Get("i")))
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
			n := open.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	ts.Start()
	defer ts.Close()
	f := &Fetcher{Timeout: time.Second, KeepAlive: true}
	defer f.CloseIdle()
	m := Member{Name: "p", HTTP: strings.TrimPrefix(ts.URL, "http://"), Up: true}
	ctx := context.Background()
	for i := range 10 {
		if b, err := f.Get(ctx, m, fmt.Sprintf("/x?i=%d", i), 100); err != nil || string(b) != fmt.Sprintf("ok %d", i) {
			t.Fatalf("request %d: %q, %v", i, b, err)
		}
	}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			b, err := f.Get(ctx, m, fmt.Sprintf("/x?i=%d", i), 100)
			if err == nil && string(b) != fmt.Sprintf("ok %d", i) {
				err = fmt.Errorf("answer %q", b)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if opened.Load() != 1 || most.Load() != 1 {
		t.Errorf("%d connections opened, %d at once, for 18 requests; want 1 and 1", opened.Load(), most.Load())
	}
}
