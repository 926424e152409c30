package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// maxListedErrors is how many bad lines an error message describes; every bad line number is
// still listed in "lines".
const maxListedErrors = 20

// maxListedLines bounds the "lines" array of an error answer.
const maxListedLines = 1000

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// WriteHandler returns the InfluxDB v1 compatible write endpoint (mount it on POST /write).
//
// The body is line protocol, optionally gzip-compressed (Content-Encoding: gzip); the `precision`
// parameter (n/ns, u/us, ms, s, m, h; default ns) scales timestamps; `db`, `rp`, `u`, `p` and
// `consistency` are accepted and ignored. Answers:
//   - 204 when every line was stored;
//   - 400 {"error": "partial write: line N: unable to parse '...': reason\n... dropped=K",
//     "lines": [N, ...]} when some lines were refused (syntax errors, field type conflicts, the
//     series limit); the valid lines of the same body are stored. The text contains "partial
//     write" and "unable to parse", so Telegraf drops the batch instead of retrying it;
//   - 413 when the body, or its decompressed form, exceeds Config.MaxBodyBytes (nothing stored);
//   - 400 for a bad precision, 405 for a method other than POST, 415 for another encoding.
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
		fail(http.StatusRequestEntityTooLarge, "request too large", fmt.Sprintf("request entity too large: body of %d bytes exceeds the limit of %d", r.ContentLength, limit), nil)
		return
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			if isTooLarge(err) {
				fail(http.StatusRequestEntityTooLarge, "request too large", fmt.Sprintf("request entity too large: body exceeds the limit of %d bytes", limit), nil)
				return
			}
			fail(http.StatusBadRequest, "invalid", "invalid gzip body: "+err.Error(), nil)
			return
		}
		defer zr.Close()
		src = zr
	default:
		fail(http.StatusUnsupportedMediaType, "unsupported media type", fmt.Sprintf("unsupported Content-Encoding %q (want gzip or none)", enc), nil)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 4<<20 {
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(src, limit+1))
	if err != nil {
		if isTooLarge(err) {
			fail(http.StatusRequestEntityTooLarge, "request too large", fmt.Sprintf("request entity too large: body exceeds the limit of %d bytes", limit), nil)
			return
		}
		fail(http.StatusBadRequest, "invalid", "read body: "+err.Error(), nil)
		return
	}
	if n > limit {
		fail(http.StatusRequestEntityTooLarge, "request too large", fmt.Sprintf("request entity too large: decompressed body exceeds the limit of %d bytes", limit), nil)
		return
	}
	body := buf.Bytes()
	points, perrs := ParseLines(body, prec, p.cfg.Now().UnixNano())
	_, aerrs := p.applyPoints(points, body)
	p.mu.Lock()
	p.stats.WriteRequests++
	p.stats.WriteRejected += uint64(len(perrs))
	p.mu.Unlock()
	if len(perrs) == 0 && len(aerrs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	all := mergeErrors(perrs, aerrs)
	var sb strings.Builder
	sb.WriteString("partial write: ")
	lines := make([]int, 0, min(len(all), maxListedLines))
	for i, e := range all {
		if i < maxListedErrors {
			if i > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(e.Error())
		}
		if i < maxListedLines {
			lines = append(lines, e.Line)
		}
	}
	if len(all) > maxListedErrors {
		fmt.Fprintf(&sb, "\n(and %d more bad lines)", len(all)-maxListedErrors)
	}
	sb.WriteString(" dropped=" + strconv.Itoa(len(all)))
	fail(http.StatusBadRequest, "invalid", sb.String(), lines)
}

// mergeErrors merges two lists of line errors sorted by line.
func mergeErrors(a, b []*LineError) []*LineError {
	out := make([]*LineError, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Line <= b[0].Line {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
