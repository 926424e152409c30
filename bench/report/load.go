package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// wrkResult is what the report takes from wrk's output.
type wrkResult struct {
	Requests     int64
	RPS          float64
	Non2xx       int64
	SocketErrors string
	P50, P99     string
	Raw          string
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	wrkSocket   = regexp.MustCompile(`Socket errors:\s+(.*)`)
	wrkP        = regexp.MustCompile(`^\s+(50|99)(?:\.000)?%\s+(\S+)`)
)

// parseWrk reads wrk's text report. A report without the request count is an error.
func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{Raw: out, SocketErrors: "none"}
	m := wrkRequests.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk: no request count in %q", truncate(out, 200))
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	if m := wrkRPS.FindStringSubmatch(out); m != nil {
		r.RPS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		r.SocketErrors = strings.TrimSpace(m[1])
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := wrkP.FindStringSubmatch(sc.Text()); m != nil {
			if m[1] == "50" {
				r.P50 = m[2]
			} else {
				r.P99 = m[2]
			}
		}
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// runWrk runs wrk against url for d with conns connections on one thread.
func runWrk(ctx context.Context, url string, d time.Duration, conns int) (wrkResult, error) {
	cmd := exec.CommandContext(ctx, "wrk", "-t1", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())),
		"--timeout", "10s", "--latency", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{Raw: string(out)}, fmt.Errorf("wrk: %w: %s", err, truncate(string(out), 300))
	}
	return parseWrk(string(out))
}

// wsLoad is n WebSocket clients each subscribed to a selector; it counts the messages.
type wsLoad struct {
	history, updates, errors, reconnects atomic.Int64
	cancel                               context.CancelFunc
	wg                                   sync.WaitGroup
}

func startWS(ctx context.Context, url string, n int, selectors []string) *wsLoad {
	ctx, cancel := context.WithCancel(ctx)
	w := &wsLoad{cancel: cancel}
	for i := 0; i < n; i++ {
		sel := selectors[i%len(selectors)]
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				if err := w.client(ctx, url, sel); err != nil && ctx.Err() == nil {
					w.errors.Add(1)
					w.reconnects.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	return w
}

func (w *wsLoad) client(ctx context.Context, url, sel string) error {
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	sub, _ := json.Marshal(map[string]string{"type": "subscribe", "id": "s", "match": sel, "history": "5m"})
	if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var m struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("message: %w", err)
		}
		switch m.Type {
		case "history":
			w.history.Add(1)
		case "update":
			w.updates.Add(1)
		case "error":
			w.errors.Add(1)
		}
	}
}

// Stop closes every client; safe once.
func (w *wsLoad) Stop() {
	w.cancel()
	w.wg.Wait()
}
