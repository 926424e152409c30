package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/shm"
)

func TestServeAndPublish(t *testing.T) {
	base := filepath.Join(t.TempDir(), "shm-app")
	t.Setenv("CANTAL_PATH", base)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, addr, false) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if _, err := os.Stat(base + ".meta"); !os.IsNotExist(err) {
			t.Errorf("meta file left after shutdown: %v", err)
		}
	}()

	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err = http.Get("http://" + addr + "/x")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	r := shm.NewReader(base, shm.ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for i := range snap.Layout.Entries {
		e := &snap.Layout.Entries[i]
		got[e.Labels["metric"]] = e.Bits(snap.Values)
	}
	if got["requests.number"] != 1 || got["requests.in_flight"] != 0 {
		t.Errorf("metrics after one request: %v", got)
	}
	if _, ok := got["requests.serving"]; !ok {
		t.Errorf("no state published: %v", got)
	}
}
