package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// maxListedErrors is how many bad lines an error message describes; every bad line number is
// still listed in "lines" (up to maxListedLines).
const maxListedErrors = 20

// maxListedLines bounds the "lines" array of an error answer.
const maxListedLines = 1000

// maxLineBytes bounds one line of a /write body; a longer line is rejected and skipped.
const maxLineBytes = 1 << 20

// readChunk is how much of a body is read at a time.
const readChunk = 64 << 10

// batchLines and batchPoints bound the lines decoded before they are stored in one go, under
// the Push's lock.
const (
	batchLines  = 512
	batchPoints = 4096
)

var readerPool = sync.Pool{New: func() any { return &entryReader{buf: make([]byte, readChunk)} }}

// WriteHandler returns the InfluxDB v1 compatible write endpoint (mount it on POST /write).
//
// The body is line protocol, optionally gzip-compressed (Content-Encoding: gzip); the `precision`
// parameter (n/ns, u/us, ms, s, m, h; default ns) scales timestamps; `db`, `rp`, `u`, `p` and
// `consistency` are accepted and ignored. The body is decoded and stored as it is read, a batch
// of lines at a time. Answers:
//   - 204 when every line was stored;
//   - 400 {"error": "partial write: line N: unable to parse '...': reason\n... dropped=K",
//     "lines": [N, ...]} when some lines were refused (syntax errors, field type conflicts, the
//     limits on labels, the series and byte budgets, more than Config.MaxRequestNewSeries new
//     series in the request, a timestamp too old for the open history segment or more than
//     Config.Interval ahead of the agent's clock: see "Points are kept as sent" in the package
//     doc); the valid lines of the same body are stored. The text describes
//     the first 20 bad lines, "lines" lists the first 1000. It contains "partial write" and
//     "unable to parse", so Telegraf drops the batch instead of retrying it;
//   - 413 when the body, or its decompressed form, exceeds Config.MaxBodyBytes, or holds more
//     than Config.MaxRequestLines lines: reading stops there. A body whose Content-Length is
//     over the limit stores nothing; otherwise the lines read before the limit was crossed are
//     stored (writing them again, as a client that splits the batch and retries does, changes
//     nothing);
//   - 400 for a bad precision, 405 for a method other than POST, 415 for another encoding.
//
// A line longer than 1 MiB (or Config.MaxBodyBytes) is rejected and skipped.
func (p *Push) WriteHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serveWrite(w, r, false) })
}

// WriteHandlerV2 returns the InfluxDB v2 compatible write endpoint (mount it on POST
// /api/v2/write). It behaves as WriteHandler, with v2's precision names (ns, us, ms, s; v1's are
// accepted too), `org`/`bucket` ignored, and v2's error objects {"code": "invalid",
// "message": "...", "lines": [...]}.
func (p *Push) WriteHandlerV2() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serveWrite(w, r, true) })
}

// PingHandler answers InfluxDB clients' GET/HEAD /ping with 204 and an X-Influxdb-Version header.
func PingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Influxdb-Version", "1.8.10-cantal")
		w.WriteHeader(http.StatusNoContent)
	})
}

func (p *Push) serveWrite(w http.ResponseWriter, r *http.Request, v2 bool) {
	fail := func(code int, v2code, msg string, lines []int) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Influxdb-Error", firstLine(msg))
		w.WriteHeader(code)
		var obj any
		if v2 {
			obj = struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Lines   []int  `json:"lines,omitempty"`
			}{v2code, msg, lines}
		} else {
			obj = struct {
				Error string `json:"error"`
				Lines []int  `json:"lines,omitempty"`
			}{msg, lines}
		}
		_ = json.NewEncoder(w).Encode(obj)
	}
	tooLarge := func(msg string) {
		p.mu.Lock()
		p.stats.WriteTooLarge++
		p.mu.Unlock()
		fail(http.StatusRequestEntityTooLarge, "request too large", "request entity too large: "+msg, nil)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method not allowed", "method "+r.Method+" not allowed: use POST", nil)
		return
	}
	prec, err := ParsePrecision(r.URL.Query().Get("precision"))
	if err != nil {
		fail(http.StatusBadRequest, "invalid", err.Error(), nil)
		return
	}
	limit := p.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		tooLarge(fmt.Sprintf("body of %d bytes exceeds the limit of %d", r.ContentLength, limit))
		return
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			if isTooLarge(err) {
				tooLarge(fmt.Sprintf("body exceeds the limit of %d bytes", limit))
				return
			}
			fail(http.StatusBadRequest, "invalid", "invalid gzip body: "+err.Error(), nil)
			return
		}
		defer zr.Close()
		// The decompressed body is bounded as it is read: a gzip bomb costs the limit, not
		// its decompressed size.
		src = &limitReader{r: zr, left: limit}
	default:
		fail(http.StatusUnsupportedMediaType, "unsupported media type", fmt.Sprintf("unsupported Content-Encoding %s (want gzip or none)", quote(enc)), nil)
		return
	}
	rd := readerPool.Get().(*entryReader)
	rd.reset(src, int(min(limit, maxLineBytes)))
	defer func() {
		rd.reset(nil, 0)
		if len(rd.buf) <= 4*readChunk {
			readerPool.Put(rd)
		}
	}()
	req := &writeReq{prec: prec, now: p.cfg.Now().UnixNano(), from: math.MinInt64}
	rules := p.rules()
	defer func() {
		p.mu.Lock()
		p.stats.WriteRequests++
		p.mu.Unlock()
	}()
	for {
		entry, line, st := rd.next()
		if st == entryEOF || st == entryErr {
			break
		}
		if req.lines++; req.lines > p.cfg.MaxRequestLines {
			p.flush(req)
			tooLarge(fmt.Sprintf("more than %d lines in one request (the lines before were stored): split the batch", p.cfg.MaxRequestLines))
			return
		}
		req.addLine(entry, line, st == entryTooLong, rd.max, rules)
		if len(req.batch) >= batchLines || len(req.points) >= batchPoints {
			p.flush(req)
		}
	}
	p.flush(req)
	if err := rd.err; err != nil {
		if isTooLarge(err) {
			what := "body"
			if errors.Is(err, errDecompressedTooLarge) {
				what = "decompressed body"
			}
			tooLarge(fmt.Sprintf("%s exceeds the limit of %d bytes (the lines before were stored)", what, limit))
			return
		}
		fail(http.StatusBadRequest, "invalid", "read body: "+cutString(err.Error(), maxReason), nil)
		return
	}
	if req.rejected == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var sb strings.Builder
	sb.WriteString("partial write: ")
	for i, e := range req.errs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(e.Error())
	}
	if req.rejected > len(req.errs) {
		fmt.Fprintf(&sb, "\n(and %d more bad lines)", req.rejected-len(req.errs))
	}
	sb.WriteString(" dropped=" + strconv.Itoa(req.rejected))
	fail(http.StatusBadRequest, "invalid", sb.String(), req.errLines)
}

// writeReq is the state of one /write request: the lines decoded and not yet stored, and what
// the answer will say.
type writeReq struct {
	prec   Precision
	now    int64 // unix ns, for lines without a timestamp
	from   int64 // unix ms: points at or before it are too old (Config.BackfillFrom)
	points []Point
	batch  []batchLine
	text   []byte    // the batch's lines, each cut to maxLineText+1 bytes, for error messages
	pend   []pending // applyLine's scratch

	lines     int // lines seen
	rejected  int // lines rejected
	newSeries int // series created
	errs      []*LineError
	errLines  []int
}

// batchLine is one line of a batch: its points (up to end in points) or the reason it was
// rejected when read, and its text.
type batchLine struct {
	line         int
	end          int
	err          error
	text0, text1 int // in text
}

// addLine decodes one line into the batch.
func (q *writeReq) addLine(entry []byte, line int, tooLong bool, maxEntry int, rules *labelRules) {
	bl := batchLine{line: line, text0: len(q.text)}
	q.text = append(q.text, entry[:min(len(entry), maxLineText+1)]...)
	bl.text1 = len(q.text)
	start := len(q.points)
	if tooLong {
		bl.err = fmt.Errorf("line longer than %d bytes", maxEntry)
	} else {
		var err error
		q.points, err = parseEntry(q.points, entry, line, q.prec, q.now, rules)
		if err != nil {
			q.points = q.points[:start]
			bl.line, bl.err = lineOf(err, line), reason(err)
		}
	}
	bl.end = len(q.points)
	q.batch = append(q.batch, bl)
}

// reject records a rejected line for the answer.
func (q *writeReq) reject(bl *batchLine, err error) {
	q.rejected++
	if len(q.errs) < maxListedErrors {
		q.errs = append(q.errs, &LineError{Line: bl.line, Text: cut(q.text[bl.text0:bl.text1]), Err: err})
	}
	if len(q.errLines) < maxListedLines {
		q.errLines = append(q.errLines, bl.line)
	}
}

// flush stores the lines of the batch, in order, and empties it.
func (p *Push) flush(q *writeReq) {
	if len(q.batch) == 0 {
		return
	}
	now := p.cfg.Now().UnixNano()
	if p.cfg.BackfillFrom != nil {
		q.from = p.cfg.BackfillFrom()
	}
	accepted, rejected, refused := 0, 0, 0
	p.mu.Lock()
	start := 0
	for i := range q.batch {
		bl := &q.batch[i]
		err := bl.err
		if err == nil {
			err = p.applyLine(q.points[start:bl.end:bl.end], q, now)
			var ref errRefused
			if errors.As(err, &ref) {
				refused++
			}
		}
		start = bl.end
		if err != nil {
			rejected++
			q.reject(bl, err)
			continue
		}
		accepted++
	}
	p.stats.WriteLines += uint64(accepted)
	p.stats.WriteRejected += uint64(rejected)
	p.stats.Refused += uint64(refused)
	p.mu.Unlock()
	clear(q.points) // let the strings go
	q.points, q.batch, q.text = q.points[:0], q.batch[:0], q.text[:0]
}

// errDecompressedTooLarge is limitReader's error.
var errDecompressedTooLarge = errors.New("decompressed body too large")

// limitReader reads at most left bytes from r, then fails with errDecompressedTooLarge as soon
// as one more is there to be read.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.left < 0 {
		return 0, errDecompressedTooLarge
	}
	if int64(len(b)) > l.left+1 {
		b = b[:l.left+1]
	}
	n, err := l.r.Read(b)
	if int64(n) > l.left {
		n, l.left = int(l.left), -1
		return n, errDecompressedTooLarge
	}
	l.left -= int64(n)
	return n, err
}

// errBudget is budgetReader's error: the shared body budget is used up.
var errBudget = errors.New("body budget used up")

// budgetReader reads r, taking what it reads from b (nil: no budget) a readChunk at a time
// ahead of the reading; release gives it all back. One goroutine.
type budgetReader struct {
	r    io.Reader
	b    Budget
	held int64 // taken from b
	read int64 // read from r
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if br.b != nil && br.read+int64(len(p)) > br.held {
		if !br.b.TryAcquire(readChunk) {
			return 0, errBudget
		}
		br.held += readChunk
		p = p[:min(int64(len(p)), br.held-br.read)]
	}
	n, err := br.r.Read(p)
	br.read += int64(n)
	return n, err
}

func (br *budgetReader) release() {
	if br.b != nil {
		br.b.Release(br.held)
		br.held = 0
	}
}

// entryStatus is what entryReader.next found.
type entryStatus int

const (
	entryOK      entryStatus = iota
	entryTooLong             // an entry longer than the limit: its first bytes, the rest skipped
	entryEOF                 // the end of the body
	entryErr                 // a read error (entryReader.err)
)

// entryReader splits a body into entries (lines) as it reads it, as splitEntry does, holding
// at most one entry (up to max bytes) and one read in memory.
type entryReader struct {
	r          io.Reader
	buf        []byte // buf[start:end] is read and not consumed
	start, end int
	max        int   // longest entry
	line       int   // line number at start
	eof        bool  // r is at its end
	err        error // r's error, other than io.EOF
	skip       bool  // skipping up to the next newline: the rest of a too-long line or comment
}

func (s *entryReader) reset(r io.Reader, maxEntry int) {
	s.r, s.start, s.end, s.max, s.line, s.eof, s.err, s.skip = r, 0, 0, maxEntry, 1, false, nil, false
}

// next returns the next entry and its line number. The entry is valid until the next call.
func (s *entryReader) next() (entry []byte, line int, st entryStatus) {
	for {
		if s.skip {
			if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
				s.start += i + 1
				s.line++
				s.skip = false
			} else {
				s.start = s.end
				if !s.fill() {
					return nil, 0, s.status()
				}
				continue
			}
		}
		adv, e, before, after, more := splitEntry(s.buf[s.start:s.end], s.eof)
		s.start += adv
		s.line += before
		if e != nil {
			line = s.line
			s.line += after
			return e, line, entryOK
		}
		if !more {
			if s.start == s.end && s.eof {
				return nil, 0, entryEOF
			}
			continue
		}
		if rest := s.buf[s.start:s.end]; len(rest) >= s.max {
			// An entry or comment longer than the limit: report the entry, skip the rest.
			line = s.line
			s.line += bytes.Count(rest, []byte{'\n'}) // newlines in quoted strings
			s.start, s.skip = s.end, true
			if rest[0] != '#' {
				return rest[:min(len(rest), maxLineText+1)], line, entryTooLong
			}
			continue
		}
		if !s.fill() {
			return nil, 0, s.status()
		}
	}
}

func (s *entryReader) status() entryStatus {
	if s.err != nil {
		return entryErr
	}
	return entryEOF
}

// fill reads more input after what is buffered. It returns false when there is no more to read.
func (s *entryReader) fill() bool {
	if s.eof || s.err != nil {
		return false
	}
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if len(s.buf)-s.end < readChunk {
		buf := make([]byte, max(2*len(s.buf), s.end+readChunk))
		copy(buf, s.buf[:s.end])
		s.buf = buf
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil:
		s.err = err
		return n > 0
	}
	return true
}

func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe) || errors.Is(err, errDecompressedTooLarge)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
