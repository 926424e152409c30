package access

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRequest: what the network face costs a request, side by side in one run: plain
// HTTP with no guard, TLS with basic auth (a remembered password), TLS with a client
// certificate, each on a kept-alive connection, and a new TLS connection (handshake with a
// client certificate) per request.
//
//	go test -run '^$' -bench Request -benchtime 2s -count 5 ./internal/access/
func BenchmarkRequest(b *testing.B) {
	f := newFixture(b, "VerifyClientCertIfGiven")
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "data") })
	plain := httptest.NewServer(ok)
	defer plain.Close()
	run := func(b *testing.B, c *http.Client, url, user, pass string) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("GET", url, nil)
			if user != "" {
				req.SetBasicAuth(user, pass)
			}
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, plain.Client(), plain.URL+"/x", "", "") })
	b.Run("tls_basic", func(b *testing.B) { run(b, f.client(nil), f.srv.URL+"/x", "reader", "rpass") })
	b.Run("tls_cert", func(b *testing.B) { run(b, f.client(&f.node), f.srv.URL+"/x", "", "") })
	b.Run("tls_cert_new_conn", func(b *testing.B) {
		c := f.client(&f.node)
		c.Transport.(*http.Transport).DisableKeepAlives = true
		run(b, c, f.srv.URL+"/x", "", "")
	})
	b.Run("plain_new_conn", func(b *testing.B) {
		c := plain.Client()
		c.Transport = &http.Transport{DisableKeepAlives: true}
		run(b, c, plain.URL+"/x", "", "")
	})
}
