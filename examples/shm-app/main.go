// Command shm-app is a small HTTP service instrumented with package shm, the Cantal
// shared-memory protocol. Start it with CANTAL_PATH set, as the Cantal agent discovers
// applications through that variable:
//
//	CANTAL_PATH=/dev/shm/shm-app go run ./examples/shm-app -listen 127.0.0.1:8080
//	curl http://127.0.0.1:8080/hello
//	cat /dev/shm/shm-app.meta
//	go run ./examples/shm-app -read /dev/shm/shm-app    # print the values, as the agent sees them
//
// It counts requests and their total duration (counters), tracks the requests in flight
// (an integer level) and the last request's duration in seconds (a float level), and shows
// the path being served (a state). With -self it also sends itself a request every 100ms, so
// numbers move without a client. On SIGINT or SIGTERM it stops and removes its files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/shm"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address to serve")
	self := flag.Bool("self", false, "send ourselves a request every 100ms")
	read := flag.String("read", "", "instead of serving, print the metrics published at this base path")
	flag.Parse()
	if *read != "" {
		if err := dump(*read); err != nil {
			fmt.Fprintln(os.Stderr, "shm-app:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *self); err != nil {
		slog.Error("shm-app failed", "err", err)
		os.Exit(1)
	}
}

// app holds the metrics.
type app struct {
	requests *shm.Counter // requests served
	duration *shm.Counter // total milliseconds spent serving them
	inFlight *shm.Integer
	last     *shm.Float // seconds the last request took
	serving  *shm.State // path being served
}

func run(ctx context.Context, listen string, self bool) error {
	coll := shm.NewCollection(shm.Options{}) // path from CANTAL_PATH, or a logged fallback
	var a app
	var err error
	if a.requests, err = coll.Counter(map[string]string{"metric": "requests.number"}); err != nil {
		return err
	}
	if a.duration, err = coll.Counter(map[string]string{"metric": "requests.duration", "unit": "ms"}); err != nil {
		return err
	}
	if a.inFlight, err = coll.Integer(map[string]string{"metric": "requests.in_flight"}); err != nil {
		return err
	}
	if a.last, err = coll.Float(map[string]string{"metric": "requests.last_duration", "unit": "s"}); err != nil {
		return err
	}
	if a.serving, err = coll.State(map[string]string{"metric": "requests.serving"}, 0); err != nil {
		return err
	}
	if err := coll.Start(); err != nil {
		return err
	}
	defer coll.Close() // removes the files
	slog.Info("publishing metrics", "path", coll.Path(), "listen", listen)

	srv := &http.Server{Addr: listen, Handler: &a, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	if self {
		go selfTraffic(ctx, "http://"+listen+"/self")
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a.inFlight.Add(1)
	a.serving.Enter(r.Method + " " + r.URL.Path)
	defer func() {
		d := time.Since(start)
		a.serving.Exit()
		a.inFlight.Sub(1)
		a.requests.Inc()
		a.duration.Add(uint64(d.Milliseconds()))
		a.last.Set(d.Seconds())
	}()
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // pretend to work
	fmt.Fprintf(w, "hello from %s; %d requests so far\n", r.URL.Path, a.requests.Get()+1)
}

func selfTraffic(ctx context.Context, url string) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// dump prints the metrics published at base once, as the agent reads them.
func dump(base string) error {
	r := shm.NewReader(base, shm.ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		return err
	}
	for i := range snap.Layout.Entries {
		e := &snap.Layout.Entries[i]
		fmt.Printf("%-8s %v = ", e.Kind, e.Labels)
		switch e.Kind {
		case shm.KindCounter:
			fmt.Println(e.Counter(snap.Values))
		case shm.KindLevel:
			fmt.Println(e.Level(snap.Values))
		case shm.KindFloat:
			fmt.Println(e.Float(snap.Values))
		case shm.KindState:
			since, text := e.State(snap.Values)
			if since == 0 {
				fmt.Println("(none)")
			} else {
				fmt.Printf("%q since %s\n", text, time.UnixMilli(since).Format(time.RFC3339Nano))
			}
		}
	}
	for _, s := range snap.Layout.Skipped {
		fmt.Println("skipped", s)
	}
	return nil
}
