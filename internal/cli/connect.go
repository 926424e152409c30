package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// connOptions say how to reach an agent and who to be towards it: --agent, the TLS files and the
// basic-auth user, from the flags or their CANTAL_* mirrors.
type connOptions struct {
	agent        string
	caFile       string // CA of the agent's certificate; "" means the system roots
	cert, key    string // client certificate (mutual TLS)
	user         string // basic-auth user
	passwordFile string // where the user's password is, unless CANTAL_PASSWORD has it
	// timeout bounds each request, from sending it to the end of the answer (--timeout,
	// CANTAL_TIMEOUT; DefaultTimeout when not given).
	timeout time.Duration
	// flagged holds the names of the flags given on the command line (as opposed to the
	// environment), so that a CANTAL_CA_FILE kept in a profile does not break queries of a
	// plain-HTTP or Unix-socket agent while an explicit --ca-file there is reported.
	flagged map[string]bool
}

// agent is a client of one agent's HTTP API.
type agent struct {
	base    *url.URL // scheme, host and path prefix of every request
	display string   // the agent as the user named it (unix:PATH or the URL)
	http    *http.Client
	// Credentials sent with every request: a basic-auth user, a client certificate.
	user, pass string
	certFile   string
	caFile     string        // "" for the system's roots
	socket     string        // the Unix socket of a unix:PATH agent
	timeout    time.Duration // of each request, answer included (0: none)
}

// parseAgent splits --agent into the base URL of requests and, for unix:PATH, the socket path.
func parseAgent(addr string) (base *url.URL, socket string, err error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		path = strings.TrimPrefix(path, "//") // unix:///run/cantal.sock
		if path == "" {
			return nil, "", fmt.Errorf("--agent %q: want unix:PATH, the agent's socket", addr)
		}
		return &url.URL{Scheme: "http", Host: "localhost"}, path, nil
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr // --agent host:port
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, "", fmt.Errorf("--agent %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", fmt.Errorf("--agent %q: want an http:// or https:// URL with a host, or unix:PATH", addr)
	}
	if u.User != nil {
		// A password in the URL would be on the command line, visible to every local user.
		return nil, "", fmt.Errorf("--agent %q: give the user with --user (and the password in CANTAL_PASSWORD, --password-file or at the prompt), not in the URL", u.Redacted())
	}
	return u, "", nil
}

// newAgent prepares the client of the agent o names: the transport (TCP, TLS with the given CA
// and client certificate, or the Unix socket) and the credentials, prompting for the password
// when it has to. hc, when not nil, is used as it is for the transport (tests).
func (c *CLI) newAgent(ctx context.Context, o connOptions, hc *http.Client) (*agent, error) {
	base, socket, err := parseAgent(o.agent)
	if err != nil {
		return nil, usagef("%v", err)
	}
	a := &agent{base: base, display: o.agent, http: hc, timeout: o.timeout}
	if socket == "" {
		a.display = base.String()
	}
	useTLS := base.Scheme == "https"
	if !useTLS {
		for _, f := range []string{"ca-file", "cert", "key"} {
			if o.flagged[f] {
				return nil, usagef("--%s applies to an https:// agent, not %s", f, a.display)
			}
		}
		o.caFile, o.cert, o.key = "", "", ""
	}
	if (o.cert == "") != (o.key == "") {
		return nil, usagef("--cert and --key go together: the client certificate and its private key (or CANTAL_CERT and CANTAL_KEY)")
	}
	if a.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if socket != "" {
			tr.Proxy = nil
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			}
		}
		if useTLS {
			tc, err := tlsConfig(o)
			if err != nil {
				return nil, err
			}
			tr.TLSClientConfig = tc
		}
		a.http = &http.Client{Transport: tr} // each request's context has the --timeout
	}
	a.certFile, a.caFile, a.socket = o.cert, o.caFile, socket
	if o.user != "" {
		if !useTLS && socket == "" && !loopbackHost(base.Hostname()) {
			return nil, fmt.Errorf("refusing to send %s's password in clear to %s: use --agent https://", o.user, a.display)
		}
		pass, err := c.password(ctx, o, a.display)
		if err != nil {
			return nil, err
		}
		a.user, a.pass = o.user, pass
	}
	return a, nil
}

// tlsConfig is the client side of TLS: the CA that signed the agent's certificate (system roots
// without --ca-file) and the client certificate, if any.
func tlsConfig(o connOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", o.caFile)
		}
		tc.RootCAs = pool
	}
	if o.cert != "" {
		pair, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return nil, fmt.Errorf("client certificate --cert %s --key %s: %w", o.cert, o.key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// password is the password of o.user: the file --password-file names, else CANTAL_PASSWORD,
// else the file CANTAL_PASSWORD_FILE names, else what the user types at the prompt (without
// echo) when standard input is a terminal. It is never taken from the command line, which
// every local user can read.
func (c *CLI) password(ctx context.Context, o connOptions, display string) (string, error) {
	file := o.passwordFile
	if !o.flagged["password-file"] {
		if p := c.getenv("CANTAL_PASSWORD"); p != "" {
			return p, nil
		}
	}
	if file != "" {
		return readPasswordFile(file)
	}
	prompt := c.Password
	if prompt == nil {
		prompt = promptTerminal(c.Stderr)
	}
	p, err := prompt(ctx, fmt.Sprintf("Password for %s at %s: ", o.user, display))
	if errors.Is(err, errNoTerminal) {
		return "", fmt.Errorf("--user %s needs a password: set CANTAL_PASSWORD, give --password-file FILE, or run on a terminal to be asked for it", o.user)
	}
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	if p == "" {
		return "", fmt.Errorf("--user %s: empty password", o.user)
	}
	return p, nil
}

// readPasswordFile reads a password file as Prometheus reads its password_file (surrounding
// white space trimmed), so that one file serves both.
func readPasswordFile(path string) (string, error) {
	b, err := readCapped(path, 64<<10)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", fmt.Errorf("--password-file %s is empty", path)
	}
	return p, nil
}

// errNoTerminal: standard input is not a terminal to prompt on.
var errNoTerminal = errors.New("standard input is not a terminal")

// explainTransport turns a failure to reach the agent into advice: which flag fixes a TLS
// failure, or that the agent is not running.
func (a *agent) explainTransport(err error) error {
	var (
		hostErr   x509.HostnameError
		authErr   x509.UnknownAuthorityError
		invErr    x509.CertificateInvalidError
		verifyErr *tls.CertificateVerificationError
		recErr    tls.RecordHeaderError
		opErr     *net.OpError
	)
	var urlErr *url.Error
	if a.socket != "" && errors.As(err, &urlErr) {
		err = urlErr.Err // its URL is not the one the user gave
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		// The agent may be running but hung (stopped, swapping, overloaded): asking whether it
		// runs would send the user the wrong way.
		return fmt.Errorf("the agent at %s did not answer within %s (it may be running but hung or overloaded; --timeout DUR or CANTAL_TIMEOUT waits longer)", a.display, a.timeout)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT) && a.socket != "":
		return fmt.Errorf("cannot reach the agent at %s: nothing listens there (is cantal-agent running? see --agent or CANTAL_AGENT): %w", a.display, err)
	case errors.As(err, &hostErr):
		return fmt.Errorf("the agent's certificate is not valid for %q (--agent must name the agent as its certificate does): %w", hostErr.Host, err)
	case errors.As(err, &authErr) && a.caFile != "":
		return fmt.Errorf("cannot verify the agent's certificate at %s: it is not signed by the CA in --ca-file %s: %w", a.display, a.caFile, err)
	case errors.As(err, &authErr):
		return fmt.Errorf("cannot verify the agent's certificate at %s: it is not signed by a CA this host trusts (give the agent's CA with --ca-file or CANTAL_CA_FILE): %w", a.display, err)
	case errors.As(err, &invErr), errors.As(err, &verifyErr):
		return fmt.Errorf("cannot verify the agent's certificate at %s (check it, and the CA given with --ca-file or CANTAL_CA_FILE): %w", a.display, err)
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("the agent at %s does not speak TLS (use --agent http://%s): %w", a.display, a.base.Host, err)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert: the agent refused the handshake, in TLS 1.3 typically over the client
		// certificate, which the server checks after the client considers the handshake done.
		if a.certFile == "" {
			return fmt.Errorf("the agent at %s refused the TLS handshake; it may require a client certificate (--cert/--key): %w", a.display, err)
		}
		return fmt.Errorf("the agent at %s refused the client certificate %s (is it issued by the CA of the agent's client_ca_file, and not expired?): %w", a.display, a.certFile, err)
	}
	return fmt.Errorf("cannot reach the agent at %s (see --agent or CANTAL_AGENT): %w", a.display, err)
}

// explainRefusal adds advice to the agent's 401 and 403 answers and to a TLS server's answer to
// plain HTTP; hint is empty when there is nothing to add.
func (a *agent) explainRefusal(code int, msg string) string {
	switch code {
	case http.StatusUnauthorized:
		switch {
		case a.user != "":
			return fmt.Sprintf("the agent refused user %q: wrong password, or a user its web config does not list", a.user)
		case a.certFile != "":
			return fmt.Sprintf("the agent did not take the client certificate %s as a credential (does its web config set client_ca_file?); give --user instead", a.certFile)
		}
		return "the agent requires credentials (--user, or --cert/--key)"
	case http.StatusForbidden:
		if !strings.Contains(msg, " role") {
			return ""
		}
		who := "this caller"
		switch {
		case a.user != "":
			who = fmt.Sprintf("user %q", a.user)
		case a.certFile != "":
			who = "the client certificate " + a.certFile
		}
		return fmt.Sprintf("%s (%s lacks it)", msg, who)
	case http.StatusBadRequest:
		if a.base.Scheme == "http" && strings.Contains(msg, "HTTP request to an HTTPS server") {
			return fmt.Sprintf("the agent serves HTTPS: use --agent https://%s", a.base.Host)
		}
	}
	return ""
}
