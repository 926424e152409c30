package hub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Fetcher makes the plain HTTP requests of the cluster routes to peers (a history window
// longer than the subscriptions keep, the peers' alerts, the cluster-wide query's selectors):
// the one HTTP client for peer answers beside the Hub's WebSocket dialer. A member with TLS is
// asked over HTTPS with its client configuration, never over plain HTTP; there is no proxy
// from the environment.
//
// Without KeepAlive every request opens a new connection, so a dead peer costs at most
// Timeout (the dial timeout, TLS handshake included): a kept-alive connection to a peer whose
// process hangs would still take the request and leave it waiting for the whole deadline,
// while a peer that accepts a fresh connection is alive and gets that deadline to compute its
// answer.
//
// With KeepAlive (the cluster-wide query, which asks every peer for every query) a Fetcher
// keeps one connection per peer and reuses it across requests: at most one connection to a
// peer at a time (a second request to it waits for the first's answer), so at most one
// connection attempt, bounded by Timeout, is ever pending for a dead peer. A peer whose cable
// was cut after the connection was made is found out by the kernel: the connection's
// TCP_USER_TIMEOUT is Timeout, so a request that the peer does not acknowledge within Timeout
// fails then, as a fresh connection attempt would, rather than at the request's deadline; a
// peer that acknowledges the request and then computes its answer gets the deadline.
//
// A Fetcher is safe for concurrent use; its zero value dials with no timeout of its own and
// opens a connection per request. Its fields are not changed after the first request.
type Fetcher struct {
	Timeout   time.Duration
	KeepAlive bool

	once   sync.Once
	client *http.Client
}

// memberTLSKey is the request context key of the member's client TLS configuration, which
// the client's TLS dial uses.
type memberTLSKey struct{}

func (f *Fetcher) httpClient() *http.Client {
	f.once.Do(func() {
		d := &net.Dialer{Timeout: f.Timeout, Control: userTimeout(f.Timeout)}
		tr := &http.Transport{
			DialContext: d.DialContext,
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				cfg, _ := ctx.Value(memberTLSKey{}).(*tls.Config)
				if f.Timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, f.Timeout)
					defer cancel()
				}
				return DialTLS(ctx, d, network, addr, cfg)
			},
			DisableKeepAlives: !f.KeepAlive,
		}
		if f.KeepAlive {
			tr.MaxConnsPerHost = 1
			tr.MaxIdleConnsPerHost = 1
			// Below the agents' server's IdleTimeout (a minute), so the peer rarely closes a
			// connection as it is being reused (a GET is retried on a new one if it does).
			tr.IdleConnTimeout = 50 * time.Second
		}
		f.client = &http.Client{Transport: tr}
	})
	return f.client
}

// CloseIdle closes the connections that no request uses now (with KeepAlive).
func (f *Fetcher) CloseIdle() { f.httpClient().CloseIdleConnections() }

// ErrTooLarge is the error of an answer longer than Get's limit.
type ErrTooLarge struct{ Limit int64 }

func (e ErrTooLarge) Error() string { return fmt.Sprintf("answer larger than %d bytes", e.Limit) }

// StatusError is the error of an answer other than 200: its status line and body.
type StatusError struct {
	Status string
	Body   []byte
}

func (e StatusError) Error() string { return fmt.Sprintf("%s: %s", e.Status, e.Body) }

// Get fetches pathQuery (such as "/api/v1/alerts") from m and returns the body of a 200
// answer. An answer longer than limit bytes is ErrTooLarge, another status a StatusError. A
// member that is down is not asked.
func (f *Fetcher) Get(ctx context.Context, m Member, pathQuery string, limit int64) ([]byte, error) {
	if m.HTTP == "" || !m.Up {
		return nil, errPeerDown
	}
	scheme := "http://"
	if m.TLS != nil {
		scheme = "https://"
		ctx = context.WithValue(ctx, memberTLSKey{}, m.TLS)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", scheme+m.HTTP+pathQuery, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, ErrTooLarge{limit}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, StatusError{resp.Status, body}
	}
	return body, nil
}

// errPeerDown is the error of a member the membership says is down (or has no address).
var errPeerDown = errors.New("peer is down")

// FanOut calls fn once for each member that is up, at most par at once, and waits for them
// all; it returns each member's error (nil where fn succeeded): errPeerDown ("peer is down")
// for a member that is down, ctx's error for one still waiting for its turn when ctx ends.
// fn(i, m) may write the i-th element of a slice of the caller's without a lock.
func FanOut(ctx context.Context, members []Member, par int, fn func(ctx context.Context, i int, m Member) error) []error {
	errs := make([]error, len(members))
	sem := make(chan struct{}, max(par, 1))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.HTTP == "" || !m.Up {
			errs[i] = errPeerDown
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			errs[i] = fn(ctx, i, m)
		}()
	}
	wg.Wait()
	return errs
}
