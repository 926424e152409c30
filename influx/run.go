package influx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseEndpoint parses an ECS metrics endpoint, "[port]/[path]" (such as "8088/ecsmetrics") or
// "[host:port]/[path]", into a listen address and an HTTP path starting with "/". An empty
// path is "/".
func ParseEndpoint(s string) (addr, path string, err error) {
	hostport, p, _ := strings.Cut(s, "/")
	path = "/" + p
	if strings.ContainsAny(path, " \t\r\n?#") {
		return "", "", fmt.Errorf("influx: endpoint %q: invalid path", s)
	}
	host, port := "", hostport
	if strings.Contains(hostport, ":") {
		if host, port, err = net.SplitHostPort(hostport); err != nil {
			return "", "", fmt.Errorf("influx: endpoint %q: %w", s, err)
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", "", fmt.Errorf("influx: endpoint %q: port %q: want 0-65535", s, port)
	}
	return net.JoinHostPort(host, strconv.FormatUint(n, 10)), path, nil
}

// Run serves the metrics at Config.Endpoint and, if Config.PushURL is set, pushes them, until
// ctx is done. It then shuts the server down, makes a last push, and returns nil; it returns an
// error if it cannot listen. Call it once, typically in its own goroutine.
func (mon *Monitor) Run(ctx context.Context) error {
	addr, _, _ := ParseEndpoint(mon.cfg.Endpoint) // checked by New
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("influx: listen: %w", err)
	}
	return mon.Serve(ctx, ln)
}

// Serve is Run on a listener the caller made; the path is Config.Endpoint's. Serve closes ln.
func (mon *Monitor) Serve(ctx context.Context, ln net.Listener) error {
	_, path, _ := ParseEndpoint(mon.cfg.Endpoint)
	mux := http.NewServeMux()
	mux.Handle(path, mon)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	pushDone := make(chan struct{})
	go func() { // exits when ctx is done
		defer close(pushDone)
		mon.pushLoop(ctx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }() // exits on Shutdown
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutCtx)
	<-pushDone
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("influx: serve: %w", err)
	}
	return nil
}

func (mon *Monitor) pushLoop(ctx context.Context) {
	if mon.cfg.PushURL == "" {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(mon.cfg.PushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Last push: everything not yet pushed, including the current second.
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			mon.push(final, true)
			cancel()
			return
		case <-t.C:
			mon.push(ctx, false)
		}
	}
}

// Push sends every bucket that changed since it was last pushed, except those of the current
// second unless all is set, to Config.PushURL; Run calls it every PushInterval. Buckets are
// marked pushed only when the agent answers 2xx; on failure they are retried by the next push
// for as long as they are kept.
func (mon *Monitor) Push(ctx context.Context, all bool) error {
	if mon.cfg.PushURL == "" {
		return errors.New("influx: push: no PushURL configured")
	}
	return mon.push(ctx, all)
}

func (mon *Monitor) push(ctx context.Context, all bool) error {
	nowSec := time.Now().Unix()
	pts := mon.collect(false, func(b *bucket) bool {
		return b.version != b.pushed && (all || b.key.sec < nowSec)
	})
	if len(pts) == 0 {
		return nil
	}
	body := mon.appendSelf(mon.appendPoints(nil, pts))
	err := mon.post(ctx, body)
	if err != nil {
		mon.pushFails.Add(1)
		mon.log.Warn("influx: push failed; will retry", "url", mon.cfg.PushURL, "points", len(pts), "err", err)
		return err
	}
	mon.pushes.Add(1)
	for i := range pts {
		p := &pts[i]
		s := &mon.shards[p.shard] // b stays in its shard, even when recycled
		s.mu.Lock()
		if p.b.gen == p.gen && p.version > p.b.pushed {
			p.b.pushed = p.version
		}
		s.mu.Unlock()
	}
	return nil
}

func (mon *Monitor) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mon.cfg.PushURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("influx: push: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := mon.cfg.PushClient.Do(req)
	if err != nil {
		return fmt.Errorf("influx: push: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("influx: push: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
