package remotewrite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"

	"github.com/cantal-go/cantal/internal/selector"
)

// File is a --remote-write-config file: a remote_write list shaped like Prometheus's.
type File struct {
	RemoteWrite []EndpointConfig `yaml:"remote_write"`
}

// EndpointConfig is one receiver's settings. The zero value, with URL set and after
// SetDefaults, sends everything with the defaults.
type EndpointConfig struct {
	URL  string `yaml:"url"`
	Name string `yaml:"name,omitempty"` // shown in the status and logs; default: the URL's host

	// Headers are added to every request (X-Scope-OrgID, …); the protocol's own cannot be set.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Match is a selector (the agent's syntax) of the series to send; empty: every series.
	Match string `yaml:"match,omitempty"`
	// ExternalLabels are added to every series that does not have the label already.
	ExternalLabels map[string]string `yaml:"external_labels,omitempty"`
	RemoteTimeout  model.Duration    `yaml:"remote_timeout,omitempty"`
	Queue          QueueConfig       `yaml:"queue_config,omitempty"`

	// HTTPClientConfig is prometheus/common's: basic_auth (password_file), authorization
	// (credentials_file), tls_config, proxy_url, follow_redirects, …
	HTTPClientConfig config.HTTPClientConfig `yaml:",inline"`

	match *selector.Selector
}

// QueueConfig bounds what one endpoint holds and how it retries.
type QueueConfig struct {
	// MaxBatchBytes bounds one request's protobuf (before snappy); a scan bigger than that is
	// sent in several requests. Default 4 MiB.
	MaxBatchBytes int `yaml:"max_batch_bytes,omitempty"`
	// ReadBytes bounds the points read from the history at once (16 bytes each); default 16 MiB.
	ReadBytes  int            `yaml:"read_bytes,omitempty"`
	MinBackoff model.Duration `yaml:"min_backoff,omitempty"` // default 100ms
	MaxBackoff model.Duration `yaml:"max_backoff,omitempty"` // default 5s
}

// Defaults.
const (
	DefaultMaxBatchBytes = 4 << 20
	DefaultReadBytes     = 16 << 20
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultTimeout       = 30 * time.Second
	maxConfigBytes       = 1 << 20
)

// reservedHeaders are set by the protocol.
var reservedHeaders = map[string]bool{
	"content-type": true, "content-encoding": true, "content-length": true,
	"x-prometheus-remote-write-version": true, "user-agent": true, "host": true,
	"authorization": true,
}

// SetDefaults fills the zero settings.
func (c *EndpointConfig) SetDefaults() {
	if c.Queue.MaxBatchBytes == 0 {
		c.Queue.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Queue.ReadBytes == 0 {
		c.Queue.ReadBytes = DefaultReadBytes
	}
	if c.Queue.MinBackoff == 0 {
		c.Queue.MinBackoff = model.Duration(DefaultMinBackoff)
	}
	if c.Queue.MaxBackoff == 0 {
		c.Queue.MaxBackoff = model.Duration(DefaultMaxBackoff)
	}
	if c.RemoteTimeout == 0 {
		c.RemoteTimeout = model.Duration(DefaultTimeout)
	}
}

// UnmarshalYAML starts from common/config's HTTP defaults (follow redirects, HTTP/2), as
// Prometheus does, then reads the endpoint.
func (c *EndpointConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = EndpointConfig{HTTPClientConfig: config.DefaultHTTPClientConfig}
	type plain EndpointConfig
	return unmarshal((*plain)(c))
}

// Validate checks c after SetDefaults and compiles its selector.
func (c *EndpointConfig) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("remote write url: %w", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("remote write url %s: want http:// or https:// and a host", RedactURL(c.URL))
	}
	if c.Match != "" {
		s, err := selector.Parse(c.Match)
		if err != nil {
			return fmt.Errorf("remote write %s: match: %w", RedactURL(c.URL), err)
		}
		c.match = s
	}
	for k := range c.Headers {
		if reservedHeaders[strings.ToLower(k)] {
			return fmt.Errorf("remote write %s: header %q is set by the protocol or by basic_auth/authorization", RedactURL(c.URL), k)
		}
		if !validHeaderName(k) {
			return fmt.Errorf("remote write %s: invalid header name %q", RedactURL(c.URL), k)
		}
	}
	for k, v := range c.Headers {
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("remote write %s: header %q: value has a line break or NUL", RedactURL(c.URL), k)
		}
	}
	for k := range c.ExternalLabels {
		if !model.LabelName(k).IsValidLegacy() || strings.HasPrefix(k, "__") {
			return fmt.Errorf("remote write %s: external label name %q is not a Prometheus label name", RedactURL(c.URL), k)
		}
	}
	q := c.Queue
	switch {
	case q.MaxBatchBytes < 1024 || q.MaxBatchBytes > 256<<20:
		return fmt.Errorf("remote write %s: queue_config.max_batch_bytes %d: want 1 KiB to 256 MiB", RedactURL(c.URL), q.MaxBatchBytes)
	case q.ReadBytes < 1024 || q.ReadBytes > 1<<30:
		return fmt.Errorf("remote write %s: queue_config.read_bytes %d: want 1 KiB to 1 GiB", RedactURL(c.URL), q.ReadBytes)
	case q.MinBackoff <= 0 || q.MaxBackoff < q.MinBackoff:
		return fmt.Errorf("remote write %s: queue_config: want 0 < min_backoff <= max_backoff", RedactURL(c.URL))
	case c.RemoteTimeout <= 0:
		return fmt.Errorf("remote write %s: remote_timeout must be positive", RedactURL(c.URL))
	}
	if err := c.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("remote write %s: %w", RedactURL(c.URL), err)
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Selector returns the compiled Match (nil: every series). Valid after Validate.
func (c *EndpointConfig) Selector() *selector.Selector { return c.match }

// ParseFile parses a --remote-write-config file's content strictly (unknown keys are errors),
// fills defaults and validates every endpoint. dir is the directory relative file names
// (password_file, credentials_file, tls_config's files) are resolved against.
func ParseFile(b []byte, dir string) ([]EndpointConfig, error) {
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("remote write config: %d bytes, at most %d", len(b), maxConfigBytes)
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("remote write config: %w", err)
	}
	if len(bytes.TrimSpace(b)) > 0 && f.RemoteWrite == nil {
		return nil, errors.New("remote write config: no remote_write list")
	}
	for i := range f.RemoteWrite {
		c := &f.RemoteWrite[i]
		c.SetDefaults()
		c.HTTPClientConfig.SetDirectory(dir)
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("remote write config: endpoint %d: %w", i+1, err)
		}
	}
	return f.RemoteWrite, nil
}

// LoadFile reads and parses a --remote-write-config file.
func LoadFile(path string) ([]EndpointConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("remote write config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("remote write config %s: %w", path, err)
	}
	abs, _ := filepath.Abs(filepath.Dir(path))
	return ParseFile(b, abs)
}

// FromURL is the endpoint of a --remote-write URL: every setting its default.
func FromURL(u string) (EndpointConfig, error) {
	c := EndpointConfig{URL: u, HTTPClientConfig: config.DefaultHTTPClientConfig}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// RedactURL returns u without its user information and query (which may hold credentials).
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable url)"
	}
	p.User = nil
	if p.RawQuery != "" {
		p.RawQuery = "…"
	}
	p.Fragment = ""
	return p.String()
}

// client returns the HTTP client for c (TLS, auth, proxy from HTTPClientConfig).
func (c *EndpointConfig) client() (*http.Client, error) {
	hc, err := config.NewClientFromConfig(c.HTTPClientConfig, "remote_write", config.WithUserAgent("cantal-agent"))
	if err != nil {
		return nil, fmt.Errorf("remote write %s: http client: %w", RedactURL(c.URL), err)
	}
	hc.Timeout = time.Duration(c.RemoteTimeout)
	return hc, nil
}
