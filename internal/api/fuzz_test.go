package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/clusteragg"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// FuzzWSRequest: any message a WebSocket client sends is answered (an error at worst), never a
// panic, and the queue of answers stays bounded.
func FuzzWSRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"subscribe","id":"a","match":"temp","history":"1m"}`,
		`{"type":"subscribe","id":"b","match":"{pid=~\"1.*\"}","fn":"rate","scope":"cluster"}`,
		`{"type":"unsubscribe","id":"a"}`, `{"type":"subscribe","history":"-1s"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	reg, ts, _ := fixture(f)
	ts.Close()
	srv := &Server{Registry: reg, MaxWindow: 3600e9, NodeName: "n"}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newWSConn(srv, context.Background())
		var req apiwire.WSRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return
		}
		w.handle(&req)
		if len(w.pending) == 0 && req.Type != "unsubscribe" {
			t.Fatalf("no answer to %s", data)
		}
		if len(w.pending) > maxPending || w.pendingBytes > w.budget || w.failed != "" {
			t.Fatalf("%d pending messages, %d bytes, failed %q", len(w.pending), w.pendingBytes, w.failed)
		}
	})
}

// FuzzParseQuery: query strings of the HTTP API are refused with an error or parsed, never a panic.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"match=temp&window=5m&fn=rate", "window=1000h", "match=%7B", "fn=x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		r := httptest.NewRequest("GET", "/api/v1/history", nil)
		r.URL.RawQuery = q
		if qq, err := ParseQuery(r, 0, 3600e9); err == nil && (qq.Sel == nil || qq.Window < 0) {
			t.Fatalf("ParseQuery(%q) = %+v without error", q, qq)
		}
	})
}

// FuzzParseGrouping: by= and without= of cluster aggregates are refused with an error or give a
// grouping that never keeps node nor a label outside the sample's.
func FuzzParseGrouping(f *testing.F) {
	for _, s := range []string{"by=app", "without=pid,process", "by=app&without=pid", "by=", "without=,,", "by=node,metric"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		g, err := clusteragg.ParseGrouping(v)
		if err != nil {
			return
		}
		in := series.Labels{"metric": "m", "node": "n", "pid": "1", "app": "a"}
		out := g.Key(in)
		if _, ok := out["node"]; ok && !v.Has("by") {
			t.Fatalf("%q keeps node: %v", q, out)
		}
		for k := range out {
			if _, ok := in[k]; !ok {
				t.Fatalf("%q invents label %s", q, k)
			}
		}
	})
}

// FuzzNodeSelection: a cluster query's node= and node matchers are refused with an error or
// select nodes without asking the nodes about a node label (the match sent has none).
func FuzzNodeSelection(f *testing.F) {
	for _, s := range []string{"node=n1", "node=n1,n2", "node=", "match=%7Bnode%3D%22n2%22%7D", "match=%7Bnode%3D~%22n.*%22%2C+metric%3D%22m%22%7D&node=a,,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		sel, err := selector.Parse(v.Get("match"))
		if err != nil {
			return
		}
		ns, err := parseNodeSelection(v, sel)
		if err != nil {
			return
		}
		rest, err := selector.Parse(ns.match)
		if err != nil {
			t.Fatalf("%q: the match sent to the nodes %q does not parse: %v", q, ns.match, err)
		}
		for _, m := range rest.Matchers() {
			if m.Name == "node" {
				t.Fatalf("%q: the match sent to the nodes %q keeps a node matcher", q, ns.match)
			}
		}
		for _, n := range ns.named {
			if ns.names != nil && !ns.names[n] && len(ns.matchers) == 0 {
				t.Fatalf("%q: %q named but not selected", q, n)
			}
		}
	})
}
