package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"github.com/cantal-go/cantal/internal/apiwire"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseProcessQuery: sort, limit and fields as /api/v1/processes documents them; anything else
// is an error naming the parameter.
func TestParseProcessQuery(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want ProcessQuery
		err  string
	}{
		{"", ProcessQuery{}, ""},
		{"sort=cpu&limit=10", ProcessQuery{Sort: "cpu", Limit: 10}, ""},
		{"sort=rss", ProcessQuery{Sort: "rss"}, ""},
		{"sort=name", ProcessQuery{}, "bad sort"},
		{"limit=0", ProcessQuery{}, "bad limit"},
		{"limit=-3", ProcessQuery{}, "bad limit"},
		{"limit=ten", ProcessQuery{}, "bad limit"},
		{"limit=99999999999", ProcessQuery{}, "bad limit"},
		{"sort=cpu&limit=10&fields=pid,name,cpu_percent,rss", ProcessQuery{Sort: "cpu", Limit: 10, Fields: []string{"pid", "name", "cpu_percent", "rss"}}, ""},
		{"fields=pid,password", ProcessQuery{}, "bad fields"},
		{"fields=pid,pid", ProcessQuery{}, "bad fields"},
		{"fields=pid,", ProcessQuery{}, "bad fields"},
	} {
		v, _ := url.ParseQuery(tc.q)
		got, err := ParseProcessQuery(v)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v; want %q", tc.q, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q = %+v, %v; want %+v", tc.q, got, err, tc.want)
		}
	}
}

func FuzzParseProcessQuery(f *testing.F) {
	for _, s := range []string{"", "sort=cpu&limit=10", "sort=rss", "limit=0", "sort=%ff", "limit=1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := url.ParseQuery(s)
		if err != nil {
			return
		}
		q, err := ParseProcessQuery(v)
		if err != nil {
			return
		}
		if q.Sort != "" && q.Sort != "cpu" && q.Sort != "rss" || q.Limit < 0 || q.Limit > maxProcessLimit {
			t.Errorf("%q accepted as %+v", s, q)
		}
	})
}

// TestJSONGzip: an API answer over 1 KiB is gzipped for a client that accepts gzip (with
// Vary), sent plain to one that does not, and the processes route passes sort and limit on
// (a bad one is a 400).
func TestJSONGzip(t *testing.T) {
	var asked ProcessQuery
	rows := make([]apiwire.Process, 200)
	for i := range rows {
		rows[i] = apiwire.Process{PID: i + 1, Name: "worker", Cmdline: []string{"/usr/bin/worker", "--serve"}}
	}
	srv := &Server{Status: func(context.Context) apiwire.Status { return apiwire.Status{NodeName: "x"} },
		Processes: func(_ context.Context, q ProcessQuery) apiwire.ProcessesAnswer {
			asked = q
			return apiwire.ProcessesAnswer{Processes: rows, Total: len(rows)}
		},
		Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	tr := &http.Transport{DisableCompression: true} // see the encoding as sent
	c := &http.Client{Transport: tr}
	fetch := func(path, enc string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	plainResp, plain := fetch("/api/v1/processes?sort=cpu&limit=10", "")
	if plainResp.Header.Get("Content-Encoding") != "" || !json.Valid(plain) {
		t.Fatalf("without Accept-Encoding: encoding %q, body valid JSON %v", plainResp.Header.Get("Content-Encoding"), json.Valid(plain))
	}
	if !reflect.DeepEqual(asked, ProcessQuery{Sort: "cpu", Limit: 10}) {
		t.Errorf("Processes asked %+v; want sort cpu, limit 10", asked)
	}
	resp, zb := fetch("/api/v1/processes", "gzip, deflate, br")
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("with Accept-Encoding gzip: Content-Encoding %q, Vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		t.Fatal(err)
	}
	unz, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unz, plain) {
		t.Fatalf("gunzipped answer differs from the plain one (%v)", err)
	}
	if len(zb)*4 > len(plain) {
		t.Errorf("gzipped %d bytes of %d; want at most a quarter", len(zb), len(plain))
	}
	if r, _ := fetch("/api/v1/processes?limit=0", "gzip"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("limit=0: %s; want 400", r.Status)
	}
}
