package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/clusteragg"
	"github.com/cantal-go/cantal/internal/stats"
)

// The cluster commands: `cantal cluster metrics|history|stats`, over the agent's
// /api/v1/cluster/metrics and /api/v1/cluster/history. The agent aggregates (agg=, by=,
// without=, internal/clusteragg) and picks the nodes (node=); the commands print its answer,
// partial slots marked, and place each node's points in the aggregate's slots with the same
// package.

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

// grouping is the aggregate grouping of o's --by or --without (clusteragg's, as the agent's).
func grouping(o options) clusteragg.Grouping {
	v := url.Values{}
	if o.by != "" {
		v.Set("by", o.by)
	}
	if o.without != "" {
		v.Set("without", o.without)
	}
	g, _ := clusteragg.ParseGrouping(v) // parse refused both at once
	return g
}

// unknownNodes is the error of an answer that names nodes the cluster does not have (status
// unknown): distinct from a node that answered without data.
func unknownNodes(heads []apiwire.NodeHead) error {
	var names []string
	for _, h := range heads {
		if h.Status == "unknown" {
			names = append(names, h.Node)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("unknown node %s: no such node in the cluster", strings.Join(names, ", "))
}

// ---- cluster metrics ----

func (c *CLI) clusterMetrics(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/cluster/metrics"
	var ans apiwire.ClusterMetricsAnswer
	fn := ""
	if o.rate {
		fn = "rate"
	}
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, "match", o.match, "fn", fn, "agg", o.agg, "by", o.by, "without", o.without, "node", o.nodes()); !ok || err != nil {
		return err
	}
	heads := make([]apiwire.NodeHead, len(ans.Nodes))
	counts := make([]int, len(ans.Nodes))
	type row struct{ node, status, name, kind, value, rate string }
	var rows []row
	for i, n := range ans.Nodes {
		heads[i], counts[i] = n.NodeHead, len(n.Series)
		for _, s := range n.Series {
			r := row{node: n.Node, status: n.Status, name: seriesName(without(s.Labels, "node")), kind: s.Kind, value: "-", rate: "-"}
			unit := s.Labels["unit"]
			if n.Status == "unreachable" {
				// Its last known values are not current: the agent says so, and so does the row.
			} else if s.Kind == "state" {
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
	unknown := unknownNodes(heads) // reported after what the known nodes answered
	if len(rows) == 0 {
		return cmp.Or(unknown, c.noSeries(o.match))
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.node, b.node)) })
	t := newTable(c.Stdout, "SERIES", "NODE", "STATUS", "KIND", "VALUE", "RATE")
	for _, r := range rows {
		t.row(r.name, r.node, r.status, r.kind, r.value, r.rate)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if o.agg == "" {
		return unknown
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
	return cmp.Or(t.flush(), unknown)
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

// group is the series that aggregate together, and the agent's aggregate of them (nil without
// --agg).
type group struct {
	key     map[string]string
	name    string
	members []member
	agg     *apiwire.HistoryAggregate
}

// groups sorts the series of a cluster history answer into aggregate groups (clusteragg's
// grouping, as the agent's), by name, each with the agent's aggregate of it.
func (ans *clusterHistoryAnswer) groups(o options) []*group {
	g := grouping(o)
	byName := map[string]*group{}
	for _, n := range ans.Nodes {
		for _, s := range n.Series {
			k := g.Key(s.Labels)
			name := seriesName(k)
			gr := byName[name]
			if gr == nil {
				gr = &group{key: k, name: name}
				byName[name] = gr
			}
			gr.members = append(gr.members, member{node: n.Node, labels: s.Labels, kind: s.Kind,
				rate: s.Fn == "rate", points: s.Points})
		}
	}
	for i := range ans.Aggregate {
		if gr := byName[seriesName(ans.Aggregate[i].Labels)]; gr != nil {
			gr.agg = &ans.Aggregate[i]
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

// points returns the members' points as clusteragg takes them (NaN: no value).
func (g *group) points() [][]clusteragg.Point {
	out := make([][]clusteragg.Point, len(g.members))
	for i, m := range g.members {
		out[i] = clusteragg.FromWire(m.points)
	}
	return out
}

// step is the width of the group's time slots: the agent's, with its aggregate, else the
// members' scan interval as clusteragg finds it.
func (g *group) step() int64 {
	if g.agg != nil && g.agg.StepMs > 0 {
		return g.agg.StepMs
	}
	return clusteragg.Step(g.points())
}

// slots lines the members' points up in the time slots the agent's aggregate uses
// (clusteragg.Align: each member on its own scan grid, one slot per scan period).
func (g *group) slots() ([]int64, [][]float64) {
	return clusteragg.Align(g.points(), g.step())
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
	body, err := a.get(ctx, path, "match", o.match, "window", o.window, "fn", fn, "agg", o.agg, "by", o.by, "without", o.without, "node", o.nodes())
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

func (c *CLI) clusterHistory(ctx context.Context, a *agent, o options) error {
	ans, body, err := c.fetchClusterHistory(ctx, a, o)
	if err != nil {
		return err
	}
	if o.output == "json" {
		// The agent's answer, its aggregate included (agg=).
		if err := c.passthrough(body); err != nil {
			return err
		}
		heads, _ := ans.heads()
		return unknownNodes(heads)
	}
	groups := ans.groups(o)
	if err := c.nodesTable(ans.heads()); err != nil {
		return err
	}
	heads, _ := ans.heads()
	unknown := unknownNodes(heads) // reported after what the known nodes answered
	if len(groups) == 0 {
		return cmp.Or(unknown, c.noSeries(o.match))
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
		aggAt := map[int64]apiwire.AggPoint{}
		if o.agg != "" {
			header = append(header, strings.ToUpper(o.agg))
			if g.agg != nil {
				for _, p := range g.agg.Points {
					aggAt[p.TS] = p
				}
			}
		}
		t := newTable(c.Stdout, header...)
		unit := g.key["unit"]
		times, rows := g.slots()
		for j, ts := range times {
			// An outage is a gap: a row saying so, never a value carried over.
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
				p, ok := aggAt[ts]
				switch {
				case !ok || !p.Value.Valid || math.IsNaN(p.Value.F):
					cells = append(cells, "-")
				case p.Partial():
					// Not the total: a node's point of this period is missing (not in yet, down).
					cells = append(cells, fmt.Sprintf("%s%s (partial: %d of %d)", withUnit(p.Value, unit), suffix, p.N, p.Expected))
				default:
					cells = append(cells, withUnit(p.Value, unit)+suffix)
				}
			}
			t.row(cells...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return unknown
}

// clusterStats computes, from the cluster history answer, the statistics the agent's
// /api/v1/stats gives (internal/stats: the same code) for every node's series and, with --agg,
// of the agent's aggregate of each group over its complete slots (a partial slot is not a
// total).
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
			if g.agg != nil {
				for _, p := range g.agg.Points {
					if !p.Partial() && p.Value.Valid && !math.IsNaN(p.Value.F) {
						pts = append(pts, stats.Point{TS: p.TS, Value: p.Value.F})
					}
				}
			}
			rows = append(rows, statRow{name: g.name, node: strings.ToUpper(o.agg), labels: g.key, n: len(g.members), sum: z.Summarize(pts)})
		}
	}
	heads, counts := ans.heads()
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
		if _, err := c.Stdout.Write(b); err != nil {
			return err
		}
		return unknownNodes(heads)
	}
	if err := c.nodesTable(heads, counts); err != nil {
		return err
	}
	unknown := unknownNodes(heads)
	if len(rows) == 0 {
		return cmp.Or(unknown, c.noSeries(o.match))
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
	return cmp.Or(t.flush(), unknown)
}
