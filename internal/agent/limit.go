package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/cantal-go/cantal/internal/api"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// limitQueries admits at most l's slots of requests at a time to the handlers that read many
// series (metrics, history, stats, labels, processes, the exports, the UI's files); the others
// wait their turn for as long as their client waits, at most the 2-minute answer deadline. A monitoring agent must not let its readers
// starve its scans: with one CPU kept free of queries (n = GOMAXPROCS-1), an API hammered by
// clients slows the answers down, not the scans.
//
// A limited request's answer is built into memory under its slot and sent after the slot is
// given back (querylimit.Limiter.Handler), so a client that never reads its answer holds only
// its own connection (issue 31, N4). The cluster routes take no slot here: they take one
// themselves around their local part, and not while they wait for the peers (N7); their answers
// are bounded and buffered all the same. Exempt, because they wait rather than compute or must
// stay cheap: the WebSocket and gossip streams, /api/v1/status and /debug/pprof/. Exemption
// goes by path only: a request to any other route that merely carries an Upgrade header waits
// its turn like the rest (finding 6).
//
// A request's body is read before it takes a slot (see readBodies), so a client that sends its
// headers and then nothing holds no slot (finding 3).
func limitQueries(next http.Handler, l *querylimit.Limiter) http.Handler {
	limited := l.Handler(next, true)
	cluster := l.Handler(next, false)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case streaming(r) || p == "/api/v1/status" || strings.HasPrefix(p, "/debug/pprof/"):
			next.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/api/v1/cluster/"):
			cluster.ServeHTTP(w, r)
		default:
			limited.ServeHTTP(w, r)
		}
	})
}

// streaming reports whether r is for a long-lived stream: the WebSocket or a gossip stream.
func streaming(r *http.Request) bool {
	return r.URL.Path == "/api/v1/ws" || r.URL.Path == cluster.GossipPath
}

// queryConcurrency is how many limited requests run at once: all CPUs but one.
func queryConcurrency() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// Timeouts of one request (not of the streams, which live as long as their client): the body
// must arrive within bodyTimeout of the headers, and the answer be written within
// writeTimeout. With the server's ReadHeaderTimeout and IdleTimeout, no connection is held by a
// silent client.
const (
	bodyTimeout  = 30 * time.Second
	writeTimeout = 2 * time.Minute
)

// deadlines sets the read and write deadlines of every request but the streams.
func deadlines(next http.Handler) http.Handler { return deadlinesOf(next, bodyTimeout, writeTimeout) }

// deadlinesOf is deadlines with the body's and the answer's timeouts given. Once the body has
// been read (at once when there is none), the read deadline becomes the answer's: net/http
// keeps reading the connection while the handler runs (to see a client that goes away), and
// that read failing at the body's deadline would cancel the request's context, ending every
// query at 30 s with "canceled" whatever --query-timeout says (CI at 2499011: 1-hour range
// queries on a loaded machine, 499).
func deadlinesOf(next http.Handler, body, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !streaming(r) {
			rc := http.NewResponseController(w)
			now := time.Now()
			rc.SetWriteDeadline(now.Add(write))
			if r.Body == nil || r.Body == http.NoBody {
				rc.SetReadDeadline(now.Add(write))
			} else {
				rc.SetReadDeadline(now.Add(body))
				r.Body = &bodyRead{ReadCloser: r.Body, done: func() { rc.SetReadDeadline(now.Add(write)) }}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyRead is a request body that calls done once it has been read to its end.
type bodyRead struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *bodyRead) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

// bodyBudget bounds the request bodies held in memory at once, in bytes, and each one.
type bodyBudget struct {
	each int64
	sem  *semaphore.Weighted
}

func newBodyBudget(each, total int64) *bodyBudget {
	return &bodyBudget{each: each, sem: semaphore.NewWeighted(total)}
}

// chunk is how much of a body is read (and taken from the budget) at a time.
const chunk = 64 << 10

// readBodies reads a request's whole body before next runs, so that the query limiter's slot is
// taken only once the client has sent everything (finding 3). Bodies are bounded each (413) and
// together (503 with Retry-After: the budget is shared by every client, so a crowd of large
// uploads makes others retry rather than the agent grow). Streams pass through.
func (b *bodyBudget) readBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || streaming(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > b.each {
			api.Error(w, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.FormatInt(b.each, 10)+" bytes")
			return
		}
		var buf bytes.Buffer
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
		var held int64
		defer func() { b.sem.Release(held) }()
		for {
			if !b.sem.TryAcquire(chunk) {
				w.Header().Set("Retry-After", "1")
				api.Error(w, http.StatusServiceUnavailable, "busy: too many request bodies in flight; retry")
				return
			}
			held += chunk
			n, err := io.CopyN(&buf, r.Body, chunk)
			if int64(buf.Len()) > b.each {
				api.Error(w, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.FormatInt(b.each, 10)+" bytes")
				return
			}
			if errors.Is(err, io.EOF) || (err == nil && n < chunk) {
				break
			}
			if err != nil {
				api.Error(w, http.StatusBadRequest, "reading the request body: "+err.Error())
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
		r.ContentLength = int64(buf.Len())
		next.ServeHTTP(w, r)
	})
}
