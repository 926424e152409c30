package remotewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sampleConfig = `
remote_write:
  - url: https://mimir.example:9009/api/v1/push
    name: mimir
    headers: {X-Scope-OrgID: team-a}
    basic_auth: {username: agent, password_file: pw}
    tls_config: {insecure_skip_verify: false}
    match: '{metric=~"cpu.*"}'
    external_labels: {dc: par1}
    remote_timeout: 10s
    queue_config: {max_batch_bytes: 65536, min_backoff: 50ms, max_backoff: 2s}
  - url: http://127.0.0.1:8428/api/v1/write
    authorization: {credentials_file: /etc/token}
`

func TestParseFile(t *testing.T) {
	eps, err := ParseFile([]byte(sampleConfig), "/etc/cantal")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 {
		t.Fatalf("%d endpoints; want 2", len(eps))
	}
	a := eps[0]
	if a.Name != "mimir" || a.Headers["X-Scope-OrgID"] != "team-a" || a.ExternalLabels["dc"] != "par1" ||
		time.Duration(a.RemoteTimeout) != 10*time.Second || a.Queue.MaxBatchBytes != 65536 ||
		time.Duration(a.Queue.MaxBackoff) != 2*time.Second || a.Queue.ReadBytes != DefaultReadBytes {
		t.Errorf("first endpoint %+v", a)
	}
	if a.HTTPClientConfig.BasicAuth == nil || a.HTTPClientConfig.BasicAuth.PasswordFile != "/etc/cantal/pw" {
		t.Errorf("basic_auth %+v; want password_file resolved against the config's directory", a.HTTPClientConfig.BasicAuth)
	}
	if a.Selector() == nil || !a.HTTPClientConfig.FollowRedirects {
		t.Errorf("selector %v, follow_redirects %v", a.Selector(), a.HTTPClientConfig.FollowRedirects)
	}
	b := eps[1]
	if b.Queue.MaxBatchBytes != DefaultMaxBatchBytes || time.Duration(b.RemoteTimeout) != DefaultTimeout ||
		b.HTTPClientConfig.Authorization == nil || b.HTTPClientConfig.Authorization.Type != "Bearer" {
		t.Errorf("second endpoint %+v", b)
	}
}

func TestParseFileRejects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"remote_write:\n  - url: http://a/\n    bogus: 1\n", "bogus"},
		{"remote_write:\n  - url: ftp://a/\n", "http"},
		{"remote_write:\n  - url: http://a/\n    match: '{a=~\"(\"}'\n", "match"},
		{"remote_write:\n  - url: http://a/\n    headers: {Content-Type: x}\n", "protocol"},
		{"remote_write:\n  - url: http://a/\n    external_labels: {__x: y}\n", "external label"},
		{"remote_write:\n  - url: http://a/\n    queue_config: {max_batch_bytes: 10}\n", "max_batch_bytes"},
		{"remote_write:\n  - url: http://a/\n    basic_auth: {username: u, password: p, password_file: f}\n", "password"},
		{"other: 1\n", "other"},
		{"remote_write: []\nremote_write: []\n", "remote_write"},
	} {
		_, err := ParseFile([]byte(tc.in), "/")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFile(%q) = %v; want an error about %q", tc.in, err, tc.want)
		}
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rw.yml")
	os.WriteFile(p, []byte(sampleConfig), 0o600)
	eps, err := LoadFile(p)
	if err != nil || len(eps) != 2 {
		t.Fatalf("LoadFile: %v, %d endpoints", err, len(eps))
	}
	if got := eps[0].HTTPClientConfig.BasicAuth.PasswordFile; got != filepath.Join(filepath.Dir(p), "pw") {
		t.Errorf("password_file %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@h:1/w?token=x": "http://h:1/w?…",
		"https://h/api/v1/write":   "https://h/api/v1/write",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte(sampleConfig))
	f.Add([]byte("remote_write:\n  - url: http://a/\n"))
	f.Add([]byte("remote_write:\n  - url: http://a/\n    queue_config: {max_batch_bytes: 10}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := ParseFile(b, "/")
		if err != nil {
			return
		}
		for _, e := range eps {
			if e.Queue.MaxBatchBytes < 1024 || e.Queue.MinBackoff <= 0 || e.RemoteTimeout <= 0 {
				t.Fatalf("accepted endpoint with bad settings: %+v", e.Queue)
			}
		}
	})
}
