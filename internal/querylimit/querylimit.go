// Package querylimit bounds the agent's queries: how many are built at once (the query slots),
// and the bytes of their answers, each one and all together, from the moment a handler writes
// them until they have been sent.
//
// A limited request takes a slot, and its handler writes its answer into memory rather than to
// the client; once the handler returns, the slot is released and only then is the answer sent.
// A client that never reads its answer so holds its own connection and the bytes of its own
// answer, never a slot (issue 31, N4): the next query is built while the slow reader's answer
// waits in the socket. The bytes an answer may take are bounded (Limiter.Each): a handler that
// builds its answer piece by piece can ask Room how many are left and stop early. The bytes of
// every answer not yet sent are bounded together (the budget): when slow readers hold it all, a
// new answer is refused with 503 and Retry-After rather than the agent growing.
//
// A Limiter is safe for concurrent use. An answer (the ResponseWriter handlers are given) is
// owned by its request's goroutine.
package querylimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Limiter is the agent's query slots and answer budget. A nil *Limiter admits everything at once
// and bounds nothing (its Acquire returns at once).
type Limiter struct {
	slots chan struct{}
	each  int64
	total int64
	held  *semaphore.Weighted // bytes of answers written and not yet sent
}

// New returns a Limiter of n slots (at least 1), whose answers take at most each bytes, and all
// of them together at most total (raised to each if below it).
func New(n int, each, total int64) *Limiter {
	each = max(each, 1)
	total = max(total, each)
	return &Limiter{slots: make(chan struct{}, max(1, n)), each: each, total: total, held: semaphore.NewWeighted(total)}
}

// Each is the bytes one answer may take.
func (l *Limiter) Each() int64 { return l.each }

// Acquire takes a slot, waiting until one is free or ctx ends (then it returns ctx's error and
// holds nothing). The returned function gives the slot back; call it once. A nil Limiter gives a
// slot at once.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a query slot: %w", ctx.Err())
	}
}

// Slot is a slot one request holds (the Limiter's, taken by Handler, or another bound's, taken
// by its handler: promapi's --query-max-concurrency), which Away gives back for a while. Make
// one with Hold. Its counts are guarded by mu: a request may call Away from more than one
// goroutine.
type Slot struct {
	give   func()                          // gives the slot back
	take   func(ctx context.Context) error // takes it again, waiting as long as ctx lets it
	parent *Slot                           // the slot the request held before this one, or nil

	mu   sync.Mutex
	held int // 1 while held, 0 while given back
	away int // Away calls running
}

type heldKey struct{}

// Hold returns ctx carrying a slot its caller has just taken (give gives it back, take takes
// it again), and the Slot, whose Release the caller calls when the request is done with it.
// Slots held one inside another (the Limiter's, then a handler's own) are given back together
// by Away and taken again in the order they were first taken.
func Hold(ctx context.Context, give func(), take func(ctx context.Context) error) (context.Context, *Slot) {
	parent, _ := ctx.Value(heldKey{}).(*Slot)
	s := &Slot{give: give, take: take, parent: parent, held: 1}
	return context.WithValue(ctx, heldKey{}, s), s
}

// Release gives the slot back if it is held (not while an Away has it given back).
func (s *Slot) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 {
		s.held--
		s.give()
	}
}

// leave gives the slot back for an Away call (the first of those running).
func (s *Slot) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.away++
	if s.away == 1 && s.held > 0 {
		s.held--
		s.give()
	}
}

// back ends an Away call: the last one takes the slot again (its error: ctx ended, the request
// goes on without it).
func (s *Slot) back(ctx context.Context) {
	s.mu.Lock()
	s.away--
	last := s.away == 0
	s.mu.Unlock()
	if !last || s.take(ctx) != nil {
		return
	}
	s.mu.Lock()
	s.held++
	if s.away > 0 { // another Away began while this one waited
		s.held--
		s.give()
	}
	s.mu.Unlock()
}

// Away runs f without the slots that ctx's request holds (Hold), and takes them again before
// it returns, in the order they were first taken, waiting as long as ctx lets it (a request
// whose context ended goes on without them: it is ending). It is for the time a request waits
// for other nodes: a request that held its slot while asking a peer, whose own request waits
// for a slot the other way, would wait with it until a timeout (two nodes asking each other a
// cluster-wide query at once). Calls from several goroutines of one request share the giving
// back: a slot is taken again when the last returns. Without a slot in ctx, Away just runs f.
func Away(ctx context.Context, f func()) {
	var chain []*Slot // innermost first
	for s, _ := ctx.Value(heldKey{}).(*Slot); s != nil; s = s.parent {
		chain = append(chain, s)
	}
	for _, s := range chain {
		s.leave()
	}
	defer func() {
		for i := len(chain) - 1; i >= 0; i-- {
			chain[i].back(ctx)
		}
	}()
	f()
}

// InUse is how many slots are taken.
func (l *Limiter) InUse() int { return len(l.slots) }

// Handler runs next for each request under a slot when slot is set, with its answer written into
// memory (bounded: see the package doc), then sends the answer once next has returned and the
// slot is given back. With slot unset it only bounds and buffers the answer: for the routes that
// take a slot themselves around the part that needs it (the cluster routes' local part).
//
// The slot travels in the request's context: a handler that waits for other nodes gives it
// back while it waits (Away).
func (l *Limiter) Handler(next http.Handler, slot bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release := func() {}
		if slot {
			if _, err := l.Acquire(r.Context()); err != nil {
				// The client gave up, or the connection's read deadline ended the request's
				// context: say why, in case the client is still there.
				Busy(w)
				return
			}
			ctx, held := Hold(r.Context(), func() { <-l.slots }, func(ctx context.Context) error {
				_, err := l.Acquire(ctx)
				return err
			})
			release = held.Release
			r = r.WithContext(ctx)
		}
		a := &answer{l: l, header: http.Header{}}
		defer a.discard()
		func() {
			defer release()
			next.ServeHTTP(a, r)
		}()
		a.send(w, r)
	})
}

// Chunk is the unit answers are stored, and charged to the budget, in.
const chunk = 64 << 10

var (
	errTooLarge = errors.New("answer too large")
	errBusy     = errors.New("answer budget used up")
)

// answer is the ResponseWriter of a limited request: the answer in memory until it is sent.
type answer struct {
	l      *Limiter
	header http.Header
	code   int
	chunks [][]byte
	size   int64 // bytes of body written
	held   int64 // bytes taken from the budget
	err    error // errTooLarge or errBusy: the answer is refused
	gaveUp bool  // the handler found no slot (Busy) and wrote nothing
	// reserved: bytes taken from the budget by Reserve for a part the answer will hold; the
	// answer's bytes are charged beyond them.
	reserved int64
}

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(code int) {
	if a.code == 0 && code >= 200 {
		a.code = code
	}
}

// charge takes n bytes from the budget, without waiting: slow readers holding the budget make a
// new answer fail rather than wait under its slot.
func (a *answer) charge(n int64) bool {
	if !a.l.held.TryAcquire(n) {
		a.err = errBusy
		return false
	}
	a.held += n
	return true
}

func (a *answer) Write(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	a.WriteHeader(http.StatusOK)
	if a.size+int64(len(p)) > a.l.each {
		a.err = errTooLarge
		return 0, a.err
	}
	n := len(p)
	for len(p) > 0 {
		last := len(a.chunks) - 1
		if last < 0 || len(a.chunks[last]) == cap(a.chunks[last]) {
			if !a.charge(chunk) {
				return n - len(p), a.err
			}
			a.chunks = append(a.chunks, make([]byte, 0, chunk))
			last++
		}
		c := a.chunks[last]
		k := min(len(p), cap(c)-len(c))
		a.chunks[last] = append(c, p[:k]...)
		p = p[k:]
		a.size += int64(k)
	}
	return n, nil
}

// keep takes b as the answer's next bytes without copying them.
func (a *answer) keep(b []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	a.WriteHeader(http.StatusOK)
	if a.size+int64(len(b)) > a.l.each {
		a.err = errTooLarge
		return 0, a.err
	}
	need := int64(cap(b)) - a.reserved
	a.reserved = max(-need, 0)
	if need > 0 && !a.charge(need) {
		return 0, a.err
	}
	a.chunks = append(a.chunks, b)
	a.size += int64(len(b))
	return len(b), nil
}

// discard drops what is left of the answer and gives its bytes back to the budget.
func (a *answer) discard() {
	clear(a.chunks)
	a.chunks = nil
	a.l.held.Release(a.held)
	a.held = 0
}

// send writes the answer to w, giving each chunk's bytes back to the budget once it is written;
// a refused answer is replaced by its error.
func (a *answer) send(w http.ResponseWriter, r *http.Request) {
	switch a.err {
	case errTooLarge:
		a.discard()
		writeError(w, http.StatusUnprocessableEntity, TooLarge(a.l.each))
		return
	case errBusy:
		a.discard()
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy: the answers waiting for slow clients take the whole answer budget; retry")
		return
	}
	if a.code == 0 && a.size == 0 && a.gaveUp {
		Busy(w)
		return
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	code := a.code
	if code == 0 {
		code = http.StatusOK
	}
	if h.Get("Content-Length") == "" && h.Get("Transfer-Encoding") == "" && code != http.StatusNoContent && code != http.StatusNotModified {
		h.Set("Content-Length", strconv.FormatInt(a.size, 10))
	}
	w.WriteHeader(code)
	for i, c := range a.chunks {
		if r.Method == http.MethodHead {
			break
		}
		if _, err := w.Write(c); err != nil {
			return // the client is gone or too slow (the write deadline); discard frees the rest
		}
		a.chunks[i] = nil
		n := min(int64(cap(c)), a.held)
		a.l.held.Release(n)
		a.held -= n
	}
}

// Busy answers 503 with Retry-After to a request that waited for a query slot until its context
// ended. A handler that takes a slot itself (Limiter.Acquire) calls it when it gets none.
func Busy(w http.ResponseWriter) {
	if a, ok := answerOf(w); ok && a.code == 0 && a.size == 0 {
		a.gaveUp = true
		return // send answers for it, once the handler has returned
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "busy: no query slot came free while the request could wait; retry")
}

// TooLarge is the error text of an answer larger than each bytes.
func TooLarge(each int64) string {
	return fmt.Sprintf("the answer is larger than the %d bytes one answer may take (--max-answer-bytes): narrow the match or shorten the window", each)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(append(b, '\n'))
}

// Room is how many more bytes w takes: what is left of its answer's bound when w is a limited
// request's, else math.MaxInt. A handler that builds a large answer stops once it is past it.
func Room(w http.ResponseWriter) int {
	if a, ok := answerOf(w); ok {
		return int(max(a.l.each-a.size, 0))
	}
	return math.MaxInt
}

// Reserve takes n bytes from w's answer budget for a part of the answer the handler holds
// before it writes it (the cluster routes' local part while they wait for the peers); the
// bytes written after are charged beyond them. It reports false when the budget has not n bytes
// left: the request is then answered 503 busy whatever the handler writes. It does nothing, and
// reports true, when w is not a limited request's.
func Reserve(w http.ResponseWriter, n int) bool {
	a, ok := answerOf(w)
	if !ok || a.err != nil {
		return !ok
	}
	if !a.charge(int64(n)) {
		return false
	}
	a.reserved += int64(n)
	return true
}

// answerOf finds the limited request's answer under w, also through writers that wrap it and
// say so with Unwrap (as http.ResponseController does: the API's gzip writer). Only for what
// concerns the answer's bounds and state: writes go through w, whatever wraps the answer.
func answerOf(w http.ResponseWriter) (*answer, bool) {
	for range 8 {
		switch x := w.(type) {
		case *answer:
			return x, true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}

// WriteOwned writes b to w, handing b over when w is a limited request's (the answer keeps it
// instead of a copy; the caller must not use b afterwards).
func WriteOwned(w http.ResponseWriter, b []byte) (int, error) {
	if a, ok := w.(*answer); ok {
		return a.keep(b)
	}
	return w.Write(b)
}
