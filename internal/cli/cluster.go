package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/stats"
)

// The cluster commands: `cantal cluster metrics|history|stats`, over the agent's
// /api/v1/cluster/metrics and /api/v1/cluster/history. metrics aggregates on the agent
// (agg=, by=, without=); history and stats aggregate here, from the history answer, with the
// same grouping rules, time-aligned on the series' scan step (see alignAggregate).

// hostLabels are the labels an aggregate drops by default, as the agent's api.HostLabels.
var hostLabels = []string{"node", "pid", "process", "cgroup"}

// nodesTable prints the nodes, their status and how many series each answered.
func (c *CLI) nodesTable(heads []apiwire.NodeHead, counts []int) error {
	t := newTable(c.Stdout, "NODE", "STATUS", "SERIES", "NOTE")
	for i, n := range heads {
		note := "-"
		switch {
		case n.Error != "":
			note = n.Error
		case n.Since != 0:
			note = "since " + c.age(n.Since)
		}
		t.row(orDash(n.Node), orDash(n.Status), strconv.Itoa(counts[i]), note)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(c.Stdout)
	return err
}

// groupKey returns the labels of the aggregate group a series belongs to: by keeps only the
// listed labels (and metric), without drops the listed ones and node, neither drops
// hostLabels; as the agent's cluster metrics route groups.
func groupKey(o options) func(map[string]string) map[string]string {
	split := func(s string) map[string]bool {
		out := map[string]bool{}
		for _, n := range strings.Split(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				out[n] = true
			}
		}
		return out
	}
	if o.by != "" {
		keep := split(o.by)
		keep["metric"] = true
		return func(l map[string]string) map[string]string {
			out := map[string]string{}
			for k, v := range l {
				if keep[k] {
					out[k] = v
				}
			}
			return out
		}
	}
	drop := map[string]bool{}
	if o.without != "" {
		drop = split(o.without)
	} else {
		for _, n := range hostLabels {
			drop[n] = true
		}
	}
	drop["node"] = true
	return func(l map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range l {
			if !drop[k] {
				out[k] = v
			}
		}
		return out
	}
}

// ---- cluster metrics ----

func (c *CLI) clusterMetrics(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/cluster/metrics"
	var ans apiwire.ClusterMetricsAnswer
	fn := ""
	if o.rate {
		fn = "rate"
	}
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, "match", o.match, "fn", fn, "agg", o.agg, "by", o.by, "without", o.without); !ok || err != nil {
		return err
	}
	heads := make([]apiwire.NodeHead, len(ans.Nodes))
	counts := make([]int, len(ans.Nodes))
	type row struct{ node, name, kind, value, rate string }
	var rows []row
	for i, n := range ans.Nodes {
		heads[i], counts[i] = n.NodeHead, len(n.Series)
		for _, s := range n.Series {
			r := row{node: n.Node, name: seriesName(without(s.Labels, "node")), kind: s.Kind, value: "-", rate: "-"}
			unit := s.Labels["unit"]
			if s.Kind == "state" {
				r.value = strconv.Quote(s.Text) // the API writes every state's text
			} else {
				r.value = withUnit(s.Value, unit)
				if s.Rate.Valid {
					r.rate = withUnit(s.Rate, unit) + "/s"
				}
			}
			rows = append(rows, r)
		}
	}
	if err := c.nodesTable(heads, counts); err != nil {
		return err
	}
	if len(rows) == 0 {
		return c.noSeries(o.match)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.node, b.node)) })
	t := newTable(c.Stdout, "SERIES", "NODE", "KIND", "VALUE", "RATE")
	for _, r := range rows {
		t.row(r.name, r.node, r.kind, r.value, r.rate)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if o.agg == "" {
		return nil
	}
	fmt.Fprintf(c.Stdout, "\nAGGREGATE (%s over the nodes that answered)\n", o.agg)
	t = newTable(c.Stdout, "SERIES", "KIND", "VALUE", "RATE", "NODES")
	for _, g := range ans.Aggregate {
		unit := g.Labels["unit"]
		rate := "-"
		if g.Rate.Valid {
			rate = withUnit(g.Rate, unit) + "/s"
		}
		t.row(seriesName(g.Labels), g.Kind, withUnit(g.Value, unit), rate, strconv.Itoa(g.Nodes))
	}
	return t.flush()
}

func without(l map[string]string, key string) map[string]string {
	if _, ok := l[key]; !ok {
		return l
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// ---- cluster history and stats ----

// clusterHistoryAnswer is the agent's /api/v1/cluster/history answer.
type clusterHistoryAnswer apiwire.ClusterHistoryAnswer

// member is one node's series in a group.
type member struct {
	node   string
	column string // the table's column title
	labels map[string]string
	kind   string
	rate   bool
	points []apiwire.Point
}

// group is the series that aggregate together.
type group struct {
	key     map[string]string
	name    string
	members []member
}

// groups sorts the series of a cluster history answer into aggregate groups, by name.
func (ans *clusterHistoryAnswer) groups(o options) []*group {
	key := groupKey(o)
	byName := map[string]*group{}
	for _, n := range ans.Nodes {
		for _, s := range n.Series {
			k := key(s.Labels)
			name := seriesName(k)
			g := byName[name]
			if g == nil {
				g = &group{key: k, name: name}
				byName[name] = g
			}
			g.members = append(g.members, member{node: n.Node, labels: s.Labels, kind: s.Kind,
				rate: s.Fn == "rate", points: s.Points})
		}
	}
	out := make([]*group, 0, len(byName))
	for _, g := range byName {
		slices.SortFunc(g.members, func(a, b member) int {
			return cmp.Or(strings.Compare(a.node, b.node), strings.Compare(seriesName(a.labels), seriesName(b.labels)))
		})
		for i := range g.members {
			m := &g.members[i]
			m.column = m.node
			if (i > 0 && g.members[i-1].node == m.node) || (i+1 < len(g.members) && g.members[i+1].node == m.node) {
				extra := map[string]string{}
				for k, v := range m.labels {
					if _, in := g.key[k]; !in && k != "node" {
						extra[k] = v
					}
				}
				m.column += " " + seriesName(extra)
			}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *group) int { return strings.Compare(a.name, b.name) })
	return out
}

// step returns the median step between the points of the group's series (0 when unknown): the
// width of the time slots in which points of different nodes are taken as simultaneous.
func (g *group) step() int64 {
	var steps []int64
	for _, m := range g.members {
		for i := 1; i < len(m.points); i++ {
			steps = append(steps, m.points[i].TS-m.points[i-1].TS)
		}
	}
	if len(steps) == 0 {
		return 0
	}
	slices.Sort(steps)
	return max(steps[len(steps)/2], 1)
}

// slots lines the members' points up in time slots of one step: slot time → one value per
// member (NaN where a member has no point in the slot). Nodes scan independently, each on its
// own grid: a member's points are placed by rounding their distance from the member's first
// point to whole steps (so a late scan does not fall into its neighbour's slot), and each
// member's grid is shifted to the group's by whole steps; a slot thus holds each node's point
// of the same scan period. A point that would meet the member's previous one in a slot (scans
// closer than a step) goes to the next slot: no point is dropped.
func (g *group) slots() ([]int64, [][]float64) {
	step := g.step()
	if step == 0 {
		step = 1
	}
	origin := int64(math.MaxInt64)
	for _, m := range g.members {
		if len(m.points) > 0 {
			origin = min(origin, m.points[0].TS)
		}
	}
	at := map[int64][]float64{}
	cell := func(idx int64, i int) *float64 {
		row := at[idx]
		if row == nil {
			row = make([]float64, len(g.members))
			for j := range row {
				row[j] = math.NaN()
			}
			at[idx] = row
		}
		return &row[i]
	}
	for i, m := range g.members {
		if len(m.points) == 0 {
			continue
		}
		phase := m.points[0].TS
		shift := floorDiv(phase-origin, step)
		last := int64(math.MinInt64)
		for _, p := range m.points {
			idx := max(shift+roundDiv(p.TS-phase, step), last+1)
			last = idx
			v := math.NaN()
			if p.Value.Valid {
				v = p.Value.F
			}
			*cell(idx, i) = v
		}
	}
	idxs := make([]int64, 0, len(at))
	for idx := range at {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	times := make([]int64, len(idxs))
	rows := make([][]float64, len(idxs))
	for k, idx := range idxs {
		times[k], rows[k] = origin+idx*step, at[idx]
	}
	return times, rows
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func roundDiv(a, b int64) int64 { return floorDiv(a+b/2, b) }

// aggregate combines the values of one slot by fn (sum, avg, min, max), skipping missing ones;
// NaN and 0 when none has a value.
func aggregate(fn string, row []float64) (float64, int) {
	var acc float64
	n := 0
	for _, v := range row {
		if math.IsNaN(v) {
			continue
		}
		switch {
		case n == 0:
			acc = v
		case fn == "min":
			acc = math.Min(acc, v)
		case fn == "max":
			acc = math.Max(acc, v)
		default:
			acc += v
		}
		n++
	}
	if n == 0 {
		return math.NaN(), 0
	}
	if fn == "avg" {
		acc /= float64(n)
	}
	return acc, n
}

func floatNum(f float64) num {
	if math.IsNaN(f) {
		return num{}
	}
	return num{F: f, Raw: strconv.FormatFloat(f, 'g', -1, 64), Valid: true}
}

func (c *CLI) fetchClusterHistory(ctx context.Context, a *agent, o options) (*clusterHistoryAnswer, []byte, error) {
	const path = "/api/v1/cluster/history"
	fn := ""
	if o.rate {
		fn = "rate"
	}
	body, err := a.get(ctx, path, "match", o.match, "window", o.window, "fn", fn)
	if err != nil {
		return nil, nil, err
	}
	var ans clusterHistoryAnswer
	if err := decode(body, path, &ans); err != nil {
		return nil, nil, err
	}
	return &ans, body, nil
}

func (ans *clusterHistoryAnswer) heads() ([]apiwire.NodeHead, []int) {
	heads := make([]apiwire.NodeHead, len(ans.Nodes))
	counts := make([]int, len(ans.Nodes))
	for i, n := range ans.Nodes {
		heads[i], counts[i] = n.NodeHead, len(n.Series)
	}
	return heads, counts
}

// appendPoint writes a point as the API does: [ts, value], non-finite values as strings.
func appendPoint(b []byte, ts int64, v float64) []byte {
	return apiwire.Point{TS: ts, Value: apiwire.Float(v)}.AppendJSON(b)
}

func (c *CLI) clusterHistory(ctx context.Context, a *agent, o options) error {
	ans, body, err := c.fetchClusterHistory(ctx, a, o)
	if err != nil {
		return err
	}
	groups := ans.groups(o)
	if o.output == "json" {
		if o.agg == "" {
			return c.passthrough(body)
		}
		// The agent's answer with the aggregate added: {"nodes": ..., "aggregate": [...]}.
		var raw struct {
			Nodes json.RawMessage `json:"nodes"`
		}
		if err := json.Unmarshal(body, &raw); err != nil {
			return err
		}
		b := append([]byte(`{"nodes":`), raw.Nodes...)
		b = append(b, `,"aggregate":[`...)
		for i, g := range groups {
			if i > 0 {
				b = append(b, ',')
			}
			key, _ := json.Marshal(g.key)
			b = append(b, `{"labels":`...)
			b = append(b, key...)
			b = append(b, `,"fn":`...)
			b = strconv.AppendQuote(b, o.agg)
			b = append(b, `,"series":`...)
			b = strconv.AppendInt(b, int64(len(g.members)), 10)
			b = append(b, `,"points":[`...)
			times, rows := g.slots()
			n := 0
			for j, ts := range times {
				v, k := aggregate(o.agg, rows[j])
				if k == 0 {
					continue
				}
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = appendPoint(b, ts, v)
			}
			b = append(b, "]}"...)
		}
		b = append(b, "]}\n"...)
		_, err := c.Stdout.Write(b)
		return err
	}
	if err := c.nodesTable(ans.heads()); err != nil {
		return err
	}
	if len(groups) == 0 {
		return c.noSeries(o.match)
	}
	for gi, g := range groups {
		if gi > 0 {
			fmt.Fprintln(c.Stdout)
		}
		m0 := g.members[0]
		what := m0.kind
		suffix := ""
		if m0.rate {
			what += ", per second"
			suffix = "/s"
		}
		step := g.step()
		fmt.Fprintf(c.Stdout, "%s (%s, %d series, time slots of %s)\n", clean(g.name), what, len(g.members),
			formatDuration(time.Duration(step)*time.Millisecond))
		header := []string{"TIME"}
		for _, m := range g.members {
			header = append(header, m.column)
		}
		if o.agg != "" {
			header = append(header, strings.ToUpper(o.agg))
		}
		t := newTable(c.Stdout, header...)
		unit := g.key["unit"]
		times, rows := g.slots()
		for j, ts := range times {
			if j > 0 && step > 0 && ts-times[j-1] > step*5/2 {
				t.row("…", "(no data for "+formatDuration(time.Duration(ts-times[j-1])*time.Millisecond)+")")
			}
			cells := []string{time.UnixMilli(ts).In(c.loc()).Format("15:04:05")}
			for _, v := range rows[j] {
				if math.IsNaN(v) {
					cells = append(cells, "-")
				} else {
					cells = append(cells, withUnit(floatNum(v), unit)+suffix)
				}
			}
			if o.agg != "" {
				v, k := aggregate(o.agg, rows[j])
				if k == 0 {
					cells = append(cells, "-")
				} else {
					cells = append(cells, withUnit(floatNum(v), unit)+suffix)
				}
			}
			t.row(cells...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// clusterStats computes, from the cluster history answer, the statistics the agent's
// /api/v1/stats gives (internal/stats: the same code) for every node's series and, with --agg,
// for the aggregate of each group.
func (c *CLI) clusterStats(ctx context.Context, a *agent, o options) error {
	ans, _, err := c.fetchClusterHistory(ctx, a, o)
	if err != nil {
		return err
	}
	groups := ans.groups(o)
	type statRow struct {
		name, node string
		labels     map[string]string
		n          int // series aggregated (aggregate rows)
		sum        stats.Summary
	}
	var z stats.Summarizer
	var rows []statRow
	var pts []stats.Point
	for _, g := range groups {
		for _, m := range g.members {
			pts = pts[:0]
			for _, p := range m.points {
				if p.Value.Valid {
					pts = append(pts, stats.Point{TS: p.TS, Value: p.Value.F})
				}
			}
			rows = append(rows, statRow{name: g.name, node: m.column, labels: m.labels, sum: z.Summarize(pts)})
		}
		if o.agg != "" {
			pts = pts[:0]
			times, vals := g.slots()
			for j, ts := range times {
				if v, k := aggregate(o.agg, vals[j]); k > 0 {
					pts = append(pts, stats.Point{TS: ts, Value: v})
				}
			}
			rows = append(rows, statRow{name: g.name, node: strings.ToUpper(o.agg), labels: g.key, n: len(g.members), sum: z.Summarize(pts)})
		}
	}
	if o.output == "json" {
		b := []byte(`{"nodes":[`)
		for i, n := range ans.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			head, _ := json.Marshal(n.NodeHead)
			b = append(b, head[:len(head)-1]...)
			b = append(b, `,"series":[`...)
			k := 0
			for _, r := range rows {
				if r.n > 0 || r.labels["node"] != n.Node {
					continue
				}
				if k > 0 {
					b = append(b, ',')
				}
				k++
				l, _ := json.Marshal(r.labels)
				b = append(b, `{"labels":`...)
				b = append(b, l...)
				b = append(b, ',')
				b = r.sum.AppendFields(b)
				b = append(b, '}')
			}
			b = append(b, "]}"...)
		}
		b = append(b, `],"aggregate":[`...)
		k := 0
		for _, r := range rows {
			if r.n == 0 {
				continue
			}
			if k > 0 {
				b = append(b, ',')
			}
			k++
			l, _ := json.Marshal(r.labels)
			b = append(b, `{"labels":`...)
			b = append(b, l...)
			b = append(b, `,"fn":`...)
			b = strconv.AppendQuote(b, o.agg)
			b = append(b, `,"series":`...)
			b = strconv.AppendInt(b, int64(r.n), 10)
			b = append(b, ',')
			b = r.sum.AppendFields(b)
			b = append(b, '}')
		}
		b = append(b, "]}\n"...)
		_, err := c.Stdout.Write(b)
		return err
	}
	if err := c.nodesTable(ans.heads()); err != nil {
		return err
	}
	if len(rows) == 0 {
		return c.noSeries(o.match)
	}
	t := newTable(c.Stdout, "SERIES", "NODE", "COUNT", "MIN", "MAX", "MEAN", "MEDIAN", "P90", "P95", "P99", "SLOPE/S")
	for _, r := range rows {
		unit := r.labels["unit"]
		v := func(f float64) string {
			if math.IsNaN(f) {
				return "-"
			}
			return withUnit(floatNum(f), unit)
		}
		s := r.sum
		t.row(r.name, r.node, strconv.Itoa(s.Count), v(s.Min), v(s.Max), v(s.Mean), v(s.Median), v(s.P90), v(s.P95), v(s.P99), v(s.Slope))
	}
	return t.flush()
}
