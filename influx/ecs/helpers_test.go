package ecs

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// start empties the store (what earlier tests sent) and runs Run(port, endpoint) in a
// goroutine, as ECS's tests do, waits until it serves, and returns its base URL and the
// channel Run's result arrives on. Stop is the caller's (or the cleanup's).
func start(t *testing.T, port uint16, endpoint string) (string, <-chan error) {
	t.Helper()
	resetStore()
	return startKeeping(t, port, endpoint)
}

// startKeeping is start without emptying the store.
func startKeeping(t *testing.T, port uint16, endpoint string) (string, <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- Run(port, endpoint)
		close(done) // so that the cleanup does not wait for a result the test took
	}()
	if !WaitUntilRunning(5 * time.Second) {
		select {
		case err := <-done:
			t.Fatalf("Run: %v", err)
		default:
			t.Fatal("not running after 5 s")
		}
	}
	_, p, err := net.SplitHostPort(Addr())
	if err != nil {
		t.Fatalf("Addr() = %q: %v", Addr(), err)
	}
	t.Cleanup(func() {
		Stop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after Stop")
		}
	})
	return "http://127.0.0.1:" + p, done
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type = %q; want text/plain, as ECS", ct)
	}
	return string(body)
}

// stored returns what the store holds, as ECS's tests read metricsInternal.
func stored(t *testing.T) (sums, hists []Metric) {
	t.Helper()
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	return metrics.agg.GetMetrics(), metrics.hist.GetMetrics()
}

// resetStore empties the store, so that a test does not scrape what an earlier one left.
func resetStore() {
	metrics.mu.Lock()
	metrics.agg.drain()
	metrics.hist.drain()
	metrics.mu.Unlock()
}

// line is one decoded line, fields kept in their order with their type letter, as ECS's
// parseMultipleLineProtocol keeps them raw.
type line struct {
	name   string
	tags   [][2]string
	fields map[string]string
	keys   []string
	ts     int64
}

// decode reads line protocol with the reference decoder, tags in the order written.
func decode(data []byte) ([]line, error) {
	var out []line
	dec := lineprotocol.NewDecoderWithBytes(data)
	for dec.Next() {
		name, err := dec.Measurement()
		if err != nil {
			return nil, err
		}
		l := line{name: string(name), fields: map[string]string{}}
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			l.tags = append(l.tags, [2]string{string(k), string(v)})
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			s := string(v.AppendBytes(nil))
			l.fields[string(k)] = s
			l.keys = append(l.keys, string(k))
		}
		ts, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil {
			return nil, err
		}
		if !ts.IsZero() {
			l.ts = ts.UnixNano()
		}
		out = append(out, l)
	}
	if err := dec.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 && strings.TrimSpace(string(data)) != "" {
		return nil, errors.New("no lines")
	}
	return out, nil
}

// lines splits a scrape into its lines, without the newlines.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
