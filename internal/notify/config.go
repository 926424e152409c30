package notify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"

	"github.com/cantal-go/cantal/internal/remotewrite"
)

// File is an --alertmanager-config file:
//
//	queue_capacity: 1000         # alerts held per Alertmanager (oldest dropped beyond)
//	alertmanagers:
//	  - url: https://am.example:9093      # the Alertmanager's base URL (path prefix kept)
//	    timeout: 10s                      # per request: connect, TLS, send, answer
//	    basic_auth: {username: u, password_file: pw}
//	    tls_config: {ca_file: ca.pem}
//	    # and the rest of prometheus/common's HTTP client settings, as remote_write's
type File struct {
	QueueCapacity int            `yaml:"queue_capacity,omitempty"`
	Alertmanagers []TargetConfig `yaml:"alertmanagers"`
}

// TargetConfig is one Alertmanager's settings.
type TargetConfig struct {
	URL     string         `yaml:"url"`
	Timeout model.Duration `yaml:"timeout,omitempty"`
	// HTTPClientConfig is prometheus/common's, as remote write's endpoints have it:
	// basic_auth (password_file), authorization (credentials_file), tls_config, proxy_url, ….
	HTTPClientConfig config.HTTPClientConfig `yaml:",inline"`
}

// Defaults and bounds.
const (
	DefaultTimeout       = 10 * time.Second // Prometheus's alertmanager_config timeout
	DefaultQueueCapacity = 1000
	MaxQueueCapacity     = 100_000
	maxConfigBytes       = 1 << 20
)

// UnmarshalYAML starts from common/config's HTTP defaults (follow redirects, HTTP/2), as
// Prometheus does.
func (c *TargetConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = TargetConfig{HTTPClientConfig: config.DefaultHTTPClientConfig}
	type plain TargetConfig
	return unmarshal((*plain)(c))
}

// validate fills c's defaults and checks it. A URL's user and password become basic auth
// (Alertmanager requests are made from its host, path and scheme alone).
func (c *TargetConfig) validate() error {
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("alertmanager url: %w", errors.Unwrap(err))
	}
	red := remotewrite.RedactURL(c.URL)
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("alertmanager url %s: want http:// or https:// and a host", red)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("alertmanager url %s: a query or fragment is not sent; give the base URL", red)
	}
	if u.User != nil {
		if c.HTTPClientConfig.BasicAuth != nil || c.HTTPClientConfig.Authorization != nil {
			return fmt.Errorf("alertmanager url %s: user in the URL and basic_auth or authorization both set", red)
		}
		pw, _ := u.User.Password()
		c.HTTPClientConfig.BasicAuth = &config.BasicAuth{Username: u.User.Username(), Password: config.Secret(pw)}
		u.User = nil
		c.URL = u.String()
	}
	if c.Timeout == 0 {
		c.Timeout = model.Duration(DefaultTimeout)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("alertmanager %s: timeout must be positive", red)
	}
	if err := c.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("alertmanager %s: %w", red, err)
	}
	return nil
}

// Name is the URL without credentials, as logs and the status show an Alertmanager.
func (c *TargetConfig) Name() string { return remotewrite.RedactURL(c.URL) }

// FromURL is the Alertmanager of an --alertmanager URL: every setting its default.
func FromURL(u string) (TargetConfig, error) {
	c := TargetConfig{URL: u, HTTPClientConfig: config.DefaultHTTPClientConfig}
	return c, c.validate()
}

// ParseFile parses an --alertmanager-config file's content strictly (unknown keys are errors)
// and validates every Alertmanager. dir is the directory relative file names (password_file,
// credentials_file, tls_config's files) are resolved against. Errors never quote the file.
func ParseFile(b []byte, dir string) (File, error) {
	var f File
	if len(b) > maxConfigBytes {
		return f, fmt.Errorf("alertmanager config: %d bytes, at most %d", len(b), maxConfigBytes)
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return File{}, fmt.Errorf("alertmanager config: %w", err)
	}
	if len(bytes.TrimSpace(b)) > 0 && f.Alertmanagers == nil {
		return File{}, errors.New("alertmanager config: no alertmanagers list")
	}
	if f.QueueCapacity < 0 || f.QueueCapacity > MaxQueueCapacity {
		return File{}, fmt.Errorf("alertmanager config: queue_capacity %d: want 1 to %d", f.QueueCapacity, MaxQueueCapacity)
	}
	for i := range f.Alertmanagers {
		c := &f.Alertmanagers[i]
		c.HTTPClientConfig.SetDirectory(dir)
		if err := c.validate(); err != nil {
			return File{}, fmt.Errorf("alertmanager config: alertmanager %d: %w", i+1, err)
		}
	}
	return f, nil
}

// LoadFile reads and parses an --alertmanager-config file.
func LoadFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("alertmanager config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("alertmanager config %s: %w", path, err)
	}
	abs, _ := filepath.Abs(filepath.Dir(path))
	return ParseFile(b, abs)
}

// Targets returns the Alertmanagers of the --alertmanager URLs and of the file (path "": none),
// and the queue capacity; a URL given twice is an error.
func Targets(urls []string, path string) ([]TargetConfig, int, error) {
	var out []TargetConfig
	for _, u := range urls {
		c, err := FromURL(u)
		if err != nil {
			return nil, 0, fmt.Errorf("--alertmanager: %w", err)
		}
		out = append(out, c)
	}
	capacity := DefaultQueueCapacity
	if path != "" {
		f, err := LoadFile(path)
		if err != nil {
			return nil, 0, fmt.Errorf("--alertmanager-config: %w", err)
		}
		out = append(out, f.Alertmanagers...)
		if f.QueueCapacity > 0 {
			capacity = f.QueueCapacity
		}
	}
	seen := map[string]bool{}
	for _, c := range out {
		k := strings.TrimRight(c.URL, "/")
		if seen[k] {
			return nil, 0, fmt.Errorf("alertmanager %s: configured twice", c.Name())
		}
		seen[k] = true
	}
	return out, capacity, nil
}
