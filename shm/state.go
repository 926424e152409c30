package shm

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// State is a piece of text with the time it was entered ("state SIZE"): what the application
// is doing right now, such as the SQL query in progress. The agent shows it but keeps no
// history. Make it with Collection.State. Its methods are safe for concurrent use (they take
// a mutex of the State only).
//
// The layout is an 8-byte host-order unix-ms timestamp, 0 meaning no state, followed by the
// text, NUL-terminated or filling the rest. A reader may see a text torn by a concurrent Enter;
// Enter clears the timestamp first and sets it last to make that window small.
type State struct {
	coll *Collection
	mu   sync.Mutex
	buf  []byte // heap before Start, the mapping after
}

// switchTo moves the state into the mapping. The collection's mutex is held.
func (s *State) switchTo(m []byte) {
	s.mu.Lock()
	copy(m[8:], s.buf[8:])
	atomic.StoreUint64(s.ts(m), binary.NativeEndian.Uint64(s.buf))
	s.buf = m
	s.mu.Unlock()
}

func (s *State) ts(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }

// Enter sets the state to text, entered now. Text longer than the state holds (its size minus
// 8 bytes) is cut at a UTF-8 character boundary; readers also end the text at a NUL byte.
func (s *State) Enter(text string) { s.EnterAt(text, time.Now()) }

// EnterAt sets the state to text, entered at t.
func (s *State) EnterAt(text string, t time.Time) {
	ms := t.UnixMilli()
	if ms == 0 {
		ms = 1 // 0 means "no state"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		s.buf = make([]byte, cacheLine)
	}
	b := s.buf
	atomic.StoreUint64(s.ts(b), 0)
	room := len(b) - 8
	if len(text) > room {
		n := room
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	n := copy(b[8:], text)
	if 8+n < len(b) {
		b[8+n] = 0
	}
	atomic.StoreUint64(s.ts(b), uint64(ms))
}

// Exit clears the state.
func (s *State) Exit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf != nil {
		atomic.StoreUint64(s.ts(s.buf), 0)
	}
}

// Get returns the current state: the unix-ms time it was entered (0: none) and its text.
func (s *State) Get() (sinceMs int64, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return 0, ""
	}
	e := Entry{Kind: KindState, Size: len(s.buf)}
	since, t := e.State(s.buf)
	if since == 0 {
		return 0, "" // Exit keeps the text in the file, as readers may show it; Get does not
	}
	return since, string(t)
}
