package export

import (
	"compress/gzip"
	"context"
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
	groups *groupState
	pool   sync.Pool // *Prom with warm buffers
	// preamble is written before the samples: the cantal_build_info family, or nothing.
	preamble []byte
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
	enc.groups = h.groups
	buf := getBuf()
	*buf = append(*buf, h.preamble...)
	samples, kept := visibleSamples(r, h.source(), h.opts.Visible)
	// The groups' counter state follows only expositions of every series (see the package doc).
	*buf = enc.append(*buf, samples, f, kept == nil)
	h.pool.Put(enc)
	putSamples(kept)
	writeBody(w, r, f.ContentType(), *buf)
	putBuf(buf)
}

// samplesPool holds the slices of the samples a caller may see.
var samplesPool = sync.Pool{New: func() any { return new([]series.Sample) }}

// visibleSamples returns the samples r's caller may see by visible: samples itself when visible
// is nil or returns nil (no allocation), else those it accepts, in a pooled slice also returned
// as kept for putSamples after use.
func visibleSamples(r *http.Request, samples []series.Sample, visible func(context.Context) func(series.Labels) bool) (_ []series.Sample, kept *[]series.Sample) {
	if visible == nil {
		return samples, nil
	}
	vis := visible(r.Context())
	if vis == nil {
		return samples, nil
	}
	kept = samplesPool.Get().(*[]series.Sample)
	out := (*kept)[:0]
	for i := range samples {
		if vis(samples[i].Labels) {
			out = append(out, samples[i])
		}
	}
	*kept = out
	return out, kept
}

// putSamples returns a slice of visibleSamples to the pool, without its references to labels.
func putSamples(kept *[]series.Sample) {
	if kept == nil {
		return
	}
	clear(*kept)
	*kept = (*kept)[:0]
	if cap(*kept) <= 1<<20 {
		samplesPool.Put(kept)
	}
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
