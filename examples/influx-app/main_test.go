package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/influx"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

func TestApp(t *testing.T) {
	var mu sync.Mutex
	pushed := 0
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		dec := lineprotocol.NewDecoderWithBytes(body)
		n := 0
		for dec.Next() {
			if _, err := dec.Measurement(); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n++
		}
		mu.Lock()
		pushed += n
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer agent.Close()

	mon, err := influx.New(influx.Config{Endpoint: "0/ecsmetrics", PushURL: agent.URL + "/write"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, mon, ln, 3, time.Millisecond) }()

	url := "http://" + ln.Addr().String() + "/ecsmetrics"
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(body, "duration_ms_p90=") || !strings.Contains(body, "processed=") {
		if time.Now().After(deadline) {
			t.Fatalf("scrape never showed both metrics: %q", body)
		}
		time.Sleep(20 * time.Millisecond)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if pushed == 0 {
		t.Error("nothing was pushed to the agent")
	}
}
