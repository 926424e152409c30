package promcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// PeerOptions bound the answers of a PeerHandler.
type PeerOptions struct {
	// MaxSamples bounds the samples of one request, all its selectors together (default
	// 50 000 000, Prometheus's --query.max-samples): a request over it is refused with
	// Prometheus's error.
	MaxSamples int
	// Timeout bounds one request (default 2 minutes, Prometheus's --query.timeout).
	Timeout time.Duration
}

// chunkSamples is the most samples a chunk of a peer select answer holds (an XOR chunk counts
// them in 16 bits).
const chunkSamples = 1024

// PeerHandler serves apiwire.PeerSelectPath from local: the samples of every selector of a
// request, in the packed form apiwire describes, so that a node asking for a cluster-wide
// query's selectors makes one request to this node per query and reads no JSON. The series are
// local's for the request's context (the caller's visibility, as on /prometheus). It is safe
// for concurrent use.
func PeerHandler(local storage.Queryable, opt PeerOptions) http.Handler {
	if opt.MaxSamples <= 0 {
		opt.MaxSamples = 50_000_000
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Minute
	}
	pp := parser.NewParser(parser.Options{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			peerError(w, http.StatusMethodNotAllowed, "bad_data", "method not allowed")
			return
		}
		params := r.URL.Query()["s"]
		if len(params) == 0 || len(params) > apiwire.MaxPeerSelectors {
			peerError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("want 1 to %d selectors (s), got %d", apiwire.MaxPeerSelectors, len(params)))
			return
		}
		type sel struct {
			apiwire.PeerSelector
			ms []*labels.Matcher
		}
		sels := make([]sel, len(params))
		for i, p := range params {
			s, err := apiwire.ParsePeerSelector(p)
			if err != nil {
				peerError(w, http.StatusBadRequest, "bad_data", err.Error())
				return
			}
			ms, err := pp.ParseMetricSelector(s.Matchers)
			if err != nil {
				peerError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("selector %d: %v", i, err))
				return
			}
			sels[i] = sel{s, ms}
		}
		ctx, cancel := context.WithTimeout(r.Context(), opt.Timeout)
		defer cancel()
		out := apiwire.AppendPeerSelectHeader(make([]byte, 0, 4096))
		samples := 0
		for _, s := range sels {
			var err error
			out, err = appendSelect(ctx, out, local, s.PeerSelector, s.ms, &samples, opt.MaxSamples)
			if err != nil {
				code, typ := http.StatusUnprocessableEntity, "execution"
				if ctx.Err() != nil {
					code, typ = http.StatusServiceUnavailable, "timeout"
				}
				peerError(w, code, typ, err.Error())
				return
			}
		}
		w.Header().Set("Content-Type", apiwire.PeerSelectType)
		w.Write(out)
	})
}

// errTooManySamples is Prometheus's error of a query over --query.max-samples.
const errTooManySamples = "query processing would load too many samples into memory in query execution"

// appendSelect appends the answer of one selector to out, counting its samples into *samples.
func appendSelect(ctx context.Context, out []byte, local storage.Queryable, s apiwire.PeerSelector, ms []*labels.Matcher, samples *int, maxSamples int) ([]byte, error) {
	if s.End < s.Start {
		return apiwire.AppendPeerSelectCount(out, 0), nil
	}
	q, err := local.Querier(s.Start, s.End)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	hints := &storage.SelectHints{Start: s.Start, End: s.End}
	if s.LabelsOnly {
		hints.Func = "series"
	}
	set := q.Select(ctx, true, hints, ms...)
	var list []apiwire.PeerSeries
	var it chunkenc.Iterator
	for set.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ser := set.At()
		ps := apiwire.PeerSeries{}
		ser.Labels().Range(func(l labels.Label) { ps.Labels = append(ps.Labels, l.Name, l.Value) })
		if s.LabelsOnly {
			list = append(list, ps)
			continue
		}
		it = ser.Iterator(it)
		var c *chunkenc.XORChunk
		var app chunkenc.Appender
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				return nil, fmt.Errorf("series %s: %s samples are not sent to peers", ser.Labels(), vt)
			}
			t, v := it.At()
			if t < s.Start {
				continue
			}
			if t > s.End {
				break
			}
			if *samples++; *samples > maxSamples {
				return nil, fmt.Errorf("%s", errTooManySamples)
			}
			if c == nil || c.NumSamples() >= chunkSamples {
				if c != nil {
					ps.Chunks = append(ps.Chunks, c.Bytes())
				}
				c = chunkenc.NewXORChunk()
				if app, err = c.Appender(); err != nil {
					return nil, err
				}
			}
			app.Append(0, t, v)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if c == nil {
			continue // no sample in the window: not in a range answer either
		}
		ps.Chunks = append(ps.Chunks, c.Bytes())
		list = append(list, ps)
	}
	if err := set.Err(); err != nil {
		return nil, err
	}
	out = apiwire.AppendPeerSelectCount(out, len(list))
	for _, ps := range list {
		out = apiwire.AppendPeerSeries(out, ps)
	}
	return out, nil
}

// peerError writes Prometheus's error answer.
func peerError(w http.ResponseWriter, code int, typ, msg string) {
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", typ, msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}
