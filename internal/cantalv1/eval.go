package cantalv1

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// Limits bound what one /query may cost: the series a rule selects (MaxSeries) and the values
// its answer holds, all rules together (MaxPoints). A query over them is refused with 400 and an
// error naming the limit, before the answer is built.
type Limits struct {
	MaxSeries int
	MaxPoints int
}

// DefaultLimits: 10 000 series per rule and 1 000 000 values per query (about 9 MB of CBOR).
var DefaultLimits = Limits{MaxSeries: 10000, MaxPoints: 1000000}

func (s *Server) limits() Limits {
	l := s.Limits
	if l.MaxSeries <= 0 {
		l.MaxSeries = DefaultLimits.MaxSeries
	}
	if l.MaxPoints <= 0 {
		l.MaxPoints = DefaultLimits.MaxPoints
	}
	return l
}

// Dataset tags (cantal_query::Dataset's CBOR tags) and conflict codes.
const (
	dsSingleSeries = 100
	dsMultiSeries  = 101
	dsSingleTip    = 200
	dsMultiTip     = 201
	dsChart        = 300
	dsEmpty        = 998
	dsIncompatible = 999

	conflictCantSumChart      = 100
	conflictDissimilar        = 101
	conflictCantSumTimestamps = 102
	conflictCantSumStates     = 103
	conflictCantDerive        = 104
)

// dataset is a rule's result (cantal_query::Dataset).
type dataset struct {
	tag      int
	series   []seriesData // SingleSeries (one), MultiSeries
	tips     []tipData    // SingleTip (one), MultiTip
	chart    map[string]uint64
	conflict int
}

// seriesData is one series' values at ts (newest first); ok[i] false is the original's None.
type seriesData struct {
	labels series.Labels
	key    []byte
	typ    int
	vals   []value
	ok     []bool
	ts     []int64
}

// tipData is one series' single value over the time slice (t0, t1), t0 the newer.
type tipData struct {
	labels series.Labels
	key    []byte
	val    value
	t0, t1 int64
}

// selected is one series a rule selects.
type selected struct {
	h  registry.Handle
	ok origKey
}

// errTooBig is a query over Limits.
type errTooBig struct{ msg string }

func (e errTooBig) Error() string { return e.msg }

// evaluate runs q over the registry for a caller who sees what visible lets through (nil: all).
func (s *Server) evaluate(q *Query, visible func(series.Labels) bool) (map[string]any, error) {
	lim := s.limits()
	view := s.Registry.View()
	hist := s.Registry.History()
	budget := lim.MaxPoints
	out := make(map[string]any, len(q.Names))
	for _, name := range q.Names {
		rule := q.Rules[name]
		var sel []selected
		var err error
		view.Each(func(h registry.Handle) bool {
			k := h.Kind()
			if (k == series.State) == rule.Fine {
				return true
			}
			l := h.Labels()
			if visible != nil && !visible(l) {
				return true
			}
			ok := mapKey(l, k)
			if !rule.Cond.Match(ok.labels) {
				return true
			}
			if len(sel) == lim.MaxSeries {
				err = errTooBig{fmt.Sprintf("rule %q selects more than %d series (the limit of one rule): narrow its condition", name, lim.MaxSeries)}
				return false
			}
			sel = append(sel, selected{h, ok.withBytes()})
			return true
		})
		if err != nil {
			return nil, err
		}
		var d dataset
		if !rule.Fine {
			if budget -= len(sel); budget < 0 {
				return nil, errTooBig{fmt.Sprintf("rule %q: the answer would hold more values than the query limit: select fewer series", name)}
			}
			d = tipStates(sel, hist)
		} else {
			d, err = extract(sel, hist, rule.Extract, &budget, name)
			if err != nil {
				return nil, err
			}
		}
		for _, f := range rule.Functions {
			d = apply(d, f)
		}
		out[name] = d.cbor()
	}
	return out, nil
}

// tipStates is source Tip: the states, each its latest text since it was entered.
func tipStates(sel []selected, hist *history.Store) dataset {
	d := dataset{tag: dsMultiTip, tips: []tipData{}}
	for _, x := range sel {
		smp, ok := x.h.Latest(hist, nil)
		if !ok {
			continue
		}
		v := value{typ: typState, text: smp.Text, since: smp.Since}
		d.tips = append(d.tips, tipData{labels: x.ok.labels, key: x.ok.bytes, val: v, t0: smp.TS, t1: smp.TS})
	}
	return d
}

// extract is source Fine: each series' tip, difference or history, as the original's
// query_history takes them from its backlog: history newest first, on the timestamps every
// selected series shares (the union of theirs; a series without a value at one has None there).
func extract(sel []selected, hist *history.Store, ex Extract, budget *int, name string) (dataset, error) {
	spend := func(n int) error {
		*budget -= n
		if *budget < 0 {
			return errTooBig{fmt.Sprintf("rule %q: the answer would hold more values than the query limit: take fewer points (HistoryByNum, HistoryByTime) or select fewer series", name)}
		}
		return nil
	}
	switch ex.Kind {
	case ExTip, ExDiffToAtMost:
		d := dataset{tag: dsMultiTip, tips: []tipData{}}
		if err := spend(len(sel)); err != nil {
			return d, err
		}
		// DiffToAtMost n: the latest value minus the one up to n scans before it (the oldest of
		// the last n+1 points); a series with no earlier point is left out, as the original
		// leaves it out.
		n := 1
		if ex.Kind == ExDiffToAtMost {
			n = int(min(ex.N, math.MaxInt32-1)) + 1
		}
		var pts []history.Point
		for _, x := range sel {
			pts = hist.Last(x.h.HistoryID(), n, pts[:0])
			if len(pts) == 0 || ex.Kind == ExDiffToAtMost && len(pts) < 2 {
				continue
			}
			newest, oldest := pts[len(pts)-1], pts[0]
			k := x.h.Kind()
			v := x.ok.convert(k, newest.Bits)
			t1 := newest.TS
			if ex.Kind == ExDiffToAtMost {
				v = diff(v, x.ok.convert(k, oldest.Bits))
				t1 = oldest.TS
			}
			d.tips = append(d.tips, tipData{labels: x.ok.labels, key: x.ok.bytes, val: v, t0: newest.TS, t1: t1})
		}
		return d, nil
	}
	// HistoryByNum, HistoryByTime: read each series' points, then align them.
	// The points read are spent from the budget as they are read (so a refused query has read
	// at most one series past it), then exchanged for the cells of the aligned answer.
	per := make([][]history.Point, len(sel))
	read := 0
	var tip int64
	if ex.Kind == ExHistoryByNum {
		n := int(min(ex.N, uint64(max(*budget, 0))+1))
		for i, x := range sel {
			per[i] = hist.Last(x.h.HistoryID(), n, nil)
			read += len(per[i])
			if err := spend(len(per[i])); err != nil {
				return dataset{}, err
			}
		}
	} else {
		for _, x := range sel {
			if p, ok := hist.Latest(x.h.HistoryID()); ok {
				tip = max(tip, p.TS)
			}
		}
		// One slot more than the window: the original keeps the first point at or past it.
		from := tip - int64(min(ex.N, math.MaxInt64/4)) - hist.MaxSlot()
		for i, x := range sel {
			hist.Range(x.h.HistoryID(), from, tip, func(ts int64, bits uint64) bool {
				per[i] = append(per[i], history.Point{TS: ts, Bits: bits})
				return len(per[i]) <= *budget
			})
			read += len(per[i])
			if err := spend(len(per[i])); err != nil {
				return dataset{}, err
			}
		}
	}
	set := map[int64]bool{}
	for _, p := range per {
		for _, pt := range p {
			set[pt.TS] = true
		}
	}
	ts := make([]int64, 0, len(set))
	for t := range set {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] > ts[j] })
	switch ex.Kind {
	case ExHistoryByNum:
		ts = ts[:min(len(ts), int(min(ex.N, math.MaxInt32)))]
	case ExHistoryByTime:
		if len(ts) > 0 {
			for i, t := range ts {
				if uint64(ts[0]-t) >= ex.N {
					ts = ts[:i+1]
					break
				}
			}
		}
	}
	*budget += read
	if err := spend(len(sel) * len(ts)); err != nil {
		return dataset{}, err
	}
	idx := make(map[int64]int, len(ts))
	for i, t := range ts {
		idx[t] = i
	}
	d := dataset{tag: dsMultiSeries, series: []seriesData{}}
	for i, x := range sel {
		sd := seriesData{labels: x.ok.labels, key: x.ok.bytes, typ: x.ok.typ, vals: make([]value, len(ts)), ok: make([]bool, len(ts)), ts: ts}
		has := false
		for _, pt := range per[i] {
			if j, ok := idx[pt.TS]; ok {
				sd.vals[j], sd.ok[j], has = x.ok.convert(x.h.Kind(), pt.Bits), true, true
			}
		}
		if has {
			d.series = append(d.series, sd)
		}
	}
	return d, nil
}

// diff is a - b as the original's DiffToAtMost: saturating at 0 for counters, at the int64
// bounds for integers.
func diff(a, b value) value {
	switch a.typ {
	case typCounter:
		if a.u >= b.u {
			a.u -= b.u
		} else {
			a.u = 0
		}
	case typInteger:
		d := a.i - b.i
		if (b.i < 0 && d < a.i) || (b.i > 0 && d > a.i) { // overflowed
			if b.i < 0 {
				d = math.MaxInt64
			} else {
				d = math.MinInt64
			}
		}
		a.i = d
	case typFloat:
		a.f -= b.f
	}
	return a
}

// apply runs one function over d.
func apply(d dataset, f Function) dataset {
	if d.tag == dsIncompatible || d.tag == dsEmpty {
		return d
	}
	switch f.Kind {
	case FnExpect:
		return expect(d, f)
	case FnNonNegativeDerivative:
		return derive(d)
	case FnSum:
		return sum(d)
	case FnSumBy:
		return sumBy(d, f.Field, f.Total)
	case FnStateChart:
		return stateChart(d, f.N)
	}
	return d
}

func incompatible(c int) dataset { return dataset{tag: dsIncompatible, conflict: c} }

// expect checks that d has the expected shape and metric kind; a dataset that has not is
// Incompatible(Dissimilar). (The original left Expect unimplemented.)
func expect(d dataset, f Function) dataset {
	want := map[string]int{"SingleSeries": dsSingleSeries, "MultiSeries": dsMultiSeries, "SingleTip": dsSingleTip,
		"MultiTip": dsMultiTip, "Chart": dsChart}[f.Expect]
	if d.tag != want {
		return incompatible(conflictDissimilar)
	}
	kindOK := func(typ int) bool {
		switch f.Metric {
		case "Counter":
			return typ == typCounter
		case "Level":
			return typ == typInteger || typ == typFloat
		case "State":
			return typ == typState
		}
		return true
	}
	for _, s := range d.series {
		if !kindOK(s.typ) {
			return incompatible(conflictDissimilar)
		}
	}
	for _, t := range d.tips {
		if !kindOK(t.val.typ) {
			return incompatible(conflictDissimilar)
		}
	}
	return d
}

// derive is NonNegativeDerivative: per second, between consecutive values (newest first), at the
// newer one's time; a pair with a missing value, or a decrease (a counter's reset), gives None.
func derive(d dataset) dataset {
	if d.tag != dsSingleSeries && d.tag != dsMultiSeries {
		return incompatible(conflictCantDerive)
	}
	out := dataset{tag: d.tag, series: make([]seriesData, 0, len(d.series))}
	for _, s := range d.series {
		if s.typ == typState {
			out.series = append(out.series, s)
			continue
		}
		n := max(len(s.ts)-1, 0)
		r := seriesData{labels: s.labels, key: s.key, typ: typFloat, vals: make([]value, n), ok: make([]bool, n), ts: s.ts[:n]}
		for i := 0; i < n; i++ {
			if !s.ok[i] || !s.ok[i+1] || s.ts[i] == s.ts[i+1] {
				continue
			}
			var delta float64
			switch s.typ {
			case typCounter:
				if s.vals[i].u < s.vals[i+1].u {
					continue
				}
				delta = float64(s.vals[i].u - s.vals[i+1].u)
			case typInteger:
				delta = float64(s.vals[i].i) - float64(s.vals[i+1].i)
			default:
				delta = s.vals[i].f - s.vals[i+1].f
			}
			if delta < 0 {
				continue
			}
			r.vals[i] = value{typ: typFloat, f: delta * 1000 / float64(s.ts[i]-s.ts[i+1])}
			r.ok[i] = true
		}
		out.series = append(out.series, r)
	}
	return out
}

func sum(d dataset) dataset {
	switch d.tag {
	case dsMultiSeries:
		switch len(d.series) {
		case 0:
			return dataset{tag: dsEmpty}
		case 1:
			return dataset{tag: dsSingleSeries, series: d.series}
		}
		s, c := sumSeries(d.series)
		if c != 0 {
			return incompatible(c)
		}
		return dataset{tag: dsSingleSeries, series: []seriesData{s}}
	case dsMultiTip:
		switch len(d.tips) {
		case 0:
			return dataset{tag: dsEmpty}
		case 1:
			return dataset{tag: dsSingleTip, tips: d.tips}
		}
		t, c := sumTips(d.tips)
		if c != 0 {
			return incompatible(c)
		}
		return dataset{tag: dsSingleTip, tips: []tipData{t}}
	case dsChart:
		return incompatible(conflictCantSumChart)
	}
	return d
}

// sumSeries adds series of one type on equal timestamps; None plus a value is the value. The
// sum's key is empty.
func sumSeries(src []seriesData) (seriesData, int) {
	ts := src[0].ts
	typ := src[0].typ
	for _, s := range src {
		if !equalTS(s.ts, ts) {
			return seriesData{}, conflictCantSumTimestamps
		}
		if s.typ == typState {
			return seriesData{}, conflictCantSumStates
		}
		if s.typ != typ {
			return seriesData{}, conflictDissimilar
		}
	}
	r := seriesData{labels: series.Labels{}, key: []byte{}, typ: typ, vals: make([]value, len(ts)), ok: make([]bool, len(ts)), ts: ts}
	for _, s := range src {
		for i := range ts {
			if !s.ok[i] {
				continue
			}
			if !r.ok[i] {
				r.vals[i], r.ok[i] = s.vals[i], true
				continue
			}
			r.vals[i] = add(r.vals[i], s.vals[i])
		}
	}
	return r, 0
}

func sumTips(src []tipData) (tipData, int) {
	typ := src[0].val.typ
	for _, t := range src {
		if t.t0 != src[0].t0 || t.t1 != src[0].t1 {
			return tipData{}, conflictCantSumTimestamps
		}
		if t.val.typ == typState {
			return tipData{}, conflictCantSumStates
		}
		if t.val.typ != typ {
			return tipData{}, conflictDissimilar
		}
	}
	r := tipData{labels: series.Labels{}, key: []byte{}, val: src[0].val, t0: src[0].t0, t1: src[0].t1}
	for _, t := range src[1:] {
		r.val = add(r.val, t.val)
	}
	return r, 0
}

func add(a, b value) value {
	a.u += b.u
	a.i += b.i
	a.f += b.f
	return a
}

func equalTS(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sumBy groups by the value of label field (series without it are left out), sums each group
// under the key {field: value}, and with total appends the sum of the groups under the empty key.
// Groups come in the order of their values.
func sumBy(d dataset, field string, total bool) dataset {
	switch d.tag {
	case dsChart:
		return incompatible(conflictCantSumChart)
	case dsSingleSeries, dsSingleTip:
		return d
	}
	groups := map[string][]int{}
	var keys []string
	n := len(d.series)
	if d.tag == dsMultiTip {
		n = len(d.tips)
	}
	for i := 0; i < n; i++ {
		l := map[string]string(nil)
		if d.tag == dsMultiTip {
			l = d.tips[i].labels
		} else {
			l = d.series[i].labels
		}
		v, ok := l[field]
		if !ok {
			continue
		}
		if groups[v] == nil {
			keys = append(keys, v)
		}
		groups[v] = append(groups[v], i)
	}
	sort.Strings(keys)
	if d.tag == dsMultiTip {
		out := dataset{tag: dsMultiTip, tips: []tipData{}}
		for _, k := range keys {
			var g []tipData
			for _, i := range groups[k] {
				g = append(g, d.tips[i])
			}
			t, c := g[0], 0
			if len(g) > 1 {
				t, c = sumTips(g)
				if c != 0 {
					return incompatible(c)
				}
			}
			t.labels = series.Labels{field: k}
			t.key = keyBytes(t.labels)
			out.tips = append(out.tips, t)
		}
		if total && len(out.tips) > 1 {
			t, c := sumTips(out.tips)
			if c != 0 {
				return incompatible(c)
			}
			out.tips = append(out.tips, t)
		}
		return out
	}
	out := dataset{tag: dsMultiSeries, series: []seriesData{}}
	for _, k := range keys {
		var g []seriesData
		for _, i := range groups[k] {
			g = append(g, d.series[i])
		}
		s, c := g[0], 0
		if len(g) > 1 {
			s, c = sumSeries(g)
			if c != 0 {
				return incompatible(c)
			}
		}
		s.labels = series.Labels{field: k}
		s.key = keyBytes(s.labels)
		out.series = append(out.series, s)
	}
	if total && len(out.series) > 1 {
		s, c := sumSeries(out.series)
		if c != 0 {
			return incompatible(c)
		}
		out.series = append(out.series, s)
	}
	return out
}

// stateChart counts the series of a tip dataset by their state text: Chart {text: count}. Past n
// distinct texts (n 0: no limit) the least frequent are counted under "other".
func stateChart(d dataset, n uint64) dataset {
	if d.tag != dsMultiTip && d.tag != dsSingleTip {
		return incompatible(conflictDissimilar)
	}
	counts := map[string]uint64{}
	for _, t := range d.tips {
		if t.val.typ != typState {
			return incompatible(conflictDissimilar)
		}
		counts[t.val.text]++
	}
	if n > 0 && uint64(len(counts)) > n {
		texts := make([]string, 0, len(counts))
		for t := range counts {
			texts = append(texts, t)
		}
		sort.Slice(texts, func(i, j int) bool {
			if counts[texts[i]] != counts[texts[j]] {
				return counts[texts[i]] > counts[texts[j]]
			}
			return texts[i] < texts[j]
		})
		kept := map[string]uint64{}
		var other uint64
		for i, t := range texts {
			if uint64(i) < n {
				kept[t] = counts[t]
			} else {
				other += counts[t]
			}
		}
		kept["other"] += other
		counts = kept
	}
	return dataset{tag: dsChart, chart: counts}
}

// cbor returns d as the original's probor encoding of Dataset: [tag, fields...].
func (d dataset) cbor() []any {
	switch d.tag {
	case dsSingleSeries:
		s := d.series[0]
		return []any{dsSingleSeries, s.key, s.chunk(), timestamps(s.ts)}
	case dsMultiSeries:
		items := make([]any, 0, len(d.series))
		for _, s := range d.series {
			items = append(items, []any{s.key, s.chunk(), timestamps(s.ts)})
		}
		return []any{dsMultiSeries, items}
	case dsSingleTip:
		t := d.tips[0]
		return []any{dsSingleTip, t.key, t.val.cbor(), []any{uint64(max(t.t0, 0)), uint64(max(t.t1, 0))}}
	case dsMultiTip:
		items := make([]any, 0, len(d.tips))
		for _, t := range d.tips {
			items = append(items, []any{t.key, t.val.cbor(), []any{uint64(max(t.t0, 0)), uint64(max(t.t1, 0))}})
		}
		return []any{dsMultiTip, items}
	case dsChart:
		m := make(map[string]uint64, len(d.chart))
		for k, v := range d.chart {
			m[k] = v
		}
		return []any{dsChart, m}
	case dsEmpty:
		return []any{dsEmpty}
	}
	return []any{dsIncompatible, []any{d.conflict}}
}

// chunk is the original's history Chunk: [type, [value or null...]].
func (s seriesData) chunk() []any {
	vals := make([]any, len(s.vals))
	for i, v := range s.vals {
		if !s.ok[i] {
			continue
		}
		switch s.typ {
		case typCounter:
			vals[i] = v.u
		case typInteger:
			vals[i] = v.i
		default:
			vals[i] = v.f
		}
	}
	return []any{s.typ, vals}
}

func timestamps(ts []int64) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = uint64(max(t, 0))
	}
	return out
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("bad body: %v (the limit is %d bytes)", err, maxBody))
		return
	}
	q, err := ParseQuery(b)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad query: "+err.Error())
		return
	}
	values, err := s.evaluate(q, s.visible(r))
	if err != nil {
		writeError(w, http.StatusBadRequest, "query refused: "+err.Error())
		return
	}
	writeCBOR(w, map[string]any{"values": values})
}

func (s *Server) visible(r *http.Request) func(series.Labels) bool {
	if s.Visible == nil {
		return nil
	}
	return s.Visible(r.Context())
}

func writeCBOR(w http.ResponseWriter, v any) {
	b, err := marshalCBOR(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// allMetrics is the original's /all_metrics: {"metrics": [[key, timestamp, value]...]} in CBOR
// whatever the suffix, as the original answers it: every series' latest value.
func (s *Server) allMetrics(w http.ResponseWriter, r *http.Request, _ Format) {
	view := s.Registry.View()
	metrics := make([]any, 0, view.Len())
	view.EachLatest(nil, s.visible(r), func(h registry.Handle, smp series.Sample) bool {
		k := mapKey(smp.Labels, h.Kind()).withBytes()
		v := value{typ: typState, text: smp.Text, since: smp.Since}
		if h.Kind() != series.State {
			v = k.convert(h.Kind(), smp.Bits)
		}
		metrics = append(metrics, []any{k.bytes, uint64(max(smp.TS, 0)), v.cbor()})
		return true
	})
	writeCBOR(w, map[string]any{"metrics": metrics})
}

// socketStats is the original's connections Stats.
type socketStats struct {
	ByState map[string]int64 `json:"by_state" cbor:"by_state"`
	RxQueue int64            `json:"rx_queue" cbor:"rx_queue"`
	TxQueue int64            `json:"tx_queue" cbor:"tx_queue"`
}

// allSockets is the original's /all_sockets (its Connections) from the tcp series: global by
// state and queues, and by_user (the uid's socket count, under the state "TOTAL": this agent
// does not count a user's sockets by state). passive and active, the original's per-socket
// lists, are empty: this agent keeps per-port counts as series (tcp.listen.*), not sockets.
func (s *Server) allSockets(w http.ResponseWriter, r *http.Request, f Format) {
	view := s.Registry.View()
	hist := s.Registry.History()
	visible := s.visible(r)
	global := socketStats{ByState: map[string]int64{}}
	byUser := map[string]socketStats{}
	var scratch [2]history.Point
	view.Each(func(h registry.Handle) bool {
		l := h.Labels()
		m := l["metric"]
		if !h.Live() || (m != "tcp.sockets" && m != "tcp.tx_queue" && m != "tcp.rx_queue" && m != "tcp.uid.sockets") {
			return true
		}
		if visible != nil && !visible(l) {
			return true
		}
		smp, ok := h.Latest(hist, scratch[:0])
		if !ok || h.Kind() != series.Level {
			return true
		}
		n := int64(smp.Bits)
		switch m {
		case "tcp.sockets":
			global.ByState[upperState(l["state"])] += n
		case "tcp.tx_queue":
			global.TxQueue += n
		case "tcp.rx_queue":
			global.RxQueue += n
		case "tcp.uid.sockets":
			byUser[l["uid"]] = socketStats{ByState: map[string]int64{"TOTAL": n}}
		}
		return true
	})
	respond(w, f, map[string]any{
		"global":  global,
		"by_user": byUser,
		"passive": map[string]any{},
		"active":  map[string]any{},
	})
}

func upperState(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
