package export

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cantal-go/cantal/internal/series"
)

// bufPool holds output buffers of handlers. Buffers over 64 MiB are not kept.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

func getBuf() *[]byte { b := bufPool.Get().(*[]byte); *b = (*b)[:0]; return b }

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<20 {
		bufPool.Put(b)
	}
}

type promHandler struct {
	source func() []series.Sample
	opts   Options
	pool   sync.Pool // *Prom with warm name caches
}

func (h *promHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, `{"error":"method not allowed: use GET"}`, http.StatusMethodNotAllowed)
		return
	}
	f := Negotiate(r.Header.Get("Accept"))
	enc, _ := h.pool.Get().(*Prom)
	if enc == nil {
		enc = &Prom{}
	}
	enc.Options = h.opts
	buf := getBuf()
	*buf = enc.Append(*buf, h.source(), f)
	h.pool.Put(enc)
	writeBody(w, r, f.ContentType(), *buf)
	putBuf(buf)
}

// writeBody writes body, gzip-compressed if the client accepts it.
func writeBody(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Add("Vary", "Accept-Encoding")
	if acceptsGzip(r.Header.Get("Accept-Encoding")) && len(body) > 1024 {
		w.Header().Set("Content-Encoding", "gzip")
		if r.Method == http.MethodHead {
			return
		}
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
		gzipPool.Put(zw)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(strings.ToLower(name)) != "gzip" {
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
			if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q == 0 {
				return false
			}
		}
		return true
	}
	return false
}
