package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// passthrough writes the agent's JSON answer as it is.
func (c *CLI) passthrough(body []byte) error {
	if _, err := c.Stdout.Write(body); err != nil {
		return err
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		_, err := io.WriteString(c.Stdout, "\n")
		return err
	}
	return nil
}

// fetch gets a route and, with -o json, prints it as it is; it returns nil body then.
func (c *CLI) fetch(ctx context.Context, a *agent, o options, path string, params ...string) ([]byte, error) {
	body, err := a.get(ctx, path, params...)
	if err != nil {
		return nil, err
	}
	if o.output == "json" {
		return nil, c.passthrough(body)
	}
	return body, nil
}

// fetchInto GETs path and decodes the answer into v. ok is false when there is nothing more to
// do: an error, or -o json, in which case the answer was already printed as it came.
func (c *CLI) fetchInto(ctx context.Context, a *agent, o options, v any, path string, params ...string) (ok bool, err error) {
	body, err := c.fetch(ctx, a, o, path, params...)
	if body == nil || err != nil {
		return false, err
	}
	return true, decode(body, path, v)
}

// ---- status ----

func (c *CLI) status(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/status"
	body, err := c.fetch(ctx, a, o, path)
	if body == nil || err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := readOrdered(dec)
	if err != nil {
		return fmt.Errorf("agent's answer to %s: %w", path, err)
	}
	obj, ok := v.([]field)
	if !ok {
		return fmt.Errorf("agent's answer to %s is not a JSON object", path)
	}
	t := newTable(c.Stdout)
	var sections []field
	c.flatten(t, "", obj, &sections)
	if err := t.flush(); err != nil {
		return err
	}
	for _, s := range sections {
		fmt.Fprintf(c.Stdout, "\n%s:\n", strings.ToUpper(s.key))
		if err := c.section(s.val.([]any)); err != nil {
			return err
		}
	}
	return nil
}

// field is one member of a JSON object, in the order the agent wrote it.
type field struct {
	key string
	val any // []field, []any, json.Number, string, bool or nil
}

// readOrdered decodes one JSON value keeping object members in order.
func readOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var obj []field
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := readOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, field{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := readOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// flatten writes the scalars of obj as "key  value" rows (nested keys joined with '.') and
// collects arrays of objects as sections printed after the table.
func (c *CLI) flatten(t *table, prefix string, obj []field, sections *[]field) {
	for _, f := range obj {
		key := prefix + f.key
		switch v := f.val.(type) {
		case []field:
			c.flatten(t, key+".", v, sections)
		case []any:
			if len(v) > 0 && isObjects(v) {
				*sections = append(*sections, field{key, v})
				continue
			}
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = c.human(f.key, x)
			}
			if len(parts) == 0 {
				t.row(key, "none")
			} else {
				t.row(key, strings.Join(parts, ", "))
			}
		default:
			t.row(key, c.human(f.key, v))
		}
	}
}

func isObjects(v []any) bool {
	for _, x := range v {
		if _, ok := x.([]field); !ok {
			return false
		}
	}
	return true
}

// section prints an array of objects as a table whose columns are the members' keys.
func (c *CLI) section(rows []any) error {
	var cols []string
	for _, r := range rows {
		for _, f := range r.([]field) {
			if !slices.Contains(cols, f.key) {
				cols = append(cols, f.key)
			}
		}
	}
	header := make([]string, len(cols))
	for i, k := range cols {
		header[i] = strings.ToUpper(k)
	}
	t := newTable(c.Stdout, header...)
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, k := range cols {
			cells[i] = "-"
			for _, f := range r.([]field) {
				if f.key == k {
					cells[i] = c.human(k, f.val)
				}
			}
		}
		t.row(cells...)
	}
	return t.flush()
}

// human formats a status value, guessing units from the key's name: *_ms and *_s durations,
// *bytes* sizes, ts/started/last_seen/*_at times.
func (c *CLI) human(key string, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case string:
		return x
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		k := strings.ToLower(key)
		switch {
		case k == "ts" || k == "started" || k == "last_seen" || k == "since" || strings.HasSuffix(k, "_at") || strings.HasSuffix(k, "_time"):
			return c.formatTime(int64(f))
		case strings.HasSuffix(k, "_ms"):
			return formatDuration(time.Duration(f * float64(time.Millisecond)))
		case strings.HasSuffix(k, "_s") || strings.HasSuffix(k, "_seconds"):
			return formatDuration(time.Duration(f * float64(time.Second)))
		case strings.Contains(k, "bytes"):
			return formatBytes(f)
		}
		if isIntLiteral(x.String()) {
			return x.String()
		}
		return formatFloat(f)
	case []field:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = f.key + "=" + c.human(f.key, f.val)
		}
		return strings.Join(parts, " ")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = c.human(key, e)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

// ---- processes ----

func (c *CLI) processes(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/processes"
	var ans apiwire.ProcessesAnswer
	if ok, err := c.fetchInto(ctx, a, o, &ans, path); !ok || err != nil {
		return err
	}
	ps := ans.Processes
	slices.SortStableFunc(ps, func(a, b apiwire.Process) int {
		switch o.sort {
		case "cpu":
			if c := cmp.Compare(b.CPUPercent, a.CPUPercent); c != 0 {
				return c
			}
		case "rss":
			if c := cmp.Compare(b.RSS, a.RSS); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.PID, b.PID)
	})
	t := newTable(c.Stdout, "PID", "PPID", "UID", "S", "THR", "CPU%", "RSS", "CGROUP", "METRICS", "COMMAND")
	for _, p := range ps {
		metrics := "-"
		if p.Metrics {
			metrics = "yes"
			if p.AppName != "" {
				metrics = p.AppName
			}
		}
		cg := p.Cgroup
		if cg == "" {
			cg = "-"
		}
		t.row(strconv.Itoa(p.PID), strconv.Itoa(p.PPID), strconv.Itoa(p.UID), p.State, strconv.Itoa(p.Threads),
			strconv.FormatFloat(p.CPUPercent, 'f', 1, 64), formatBytes(float64(p.RSS)), cg, metrics, command(p.Name, p.Cmdline))
	}
	return t.flush()
}

// ---- containers ----

// containers prints /api/v1/containers as a table, in the agent's order (sort=cpu|mem asks it
// to sort; by name it sorts by default).
func (c *CLI) containers(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/containers"
	var params []string
	if o.sort != "name" {
		params = []string{"sort", o.sort}
	}
	var ans apiwire.ContainersAnswer
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, params...); !ok || err != nil {
		return err
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	rate := func(r *apiwire.StdFloat) string {
		if r == nil {
			return "-"
		}
		return formatBytes(float64(*r)) + "/s"
	}
	t := newTable(c.Stdout, "NAME", "IMAGE", "POD", "CPU%", "THROTTLED", "MEM", "LIMIT", "OOM", "PROCS", "IO R/W", "NET RX/TX", "ID")
	for _, ct := range ans.Containers {
		pod := ct.Pod
		if pod != "" && ct.Namespace != "" {
			pod = ct.Namespace + "/" + pod
		}
		throttled := "-" // no CFS quota: no periods
		if ct.CPUPeriods > 0 {
			throttled = strconv.FormatFloat(float64(ct.ThrottledPercent), 'f', 0, 64) + "%"
		}
		limit := "-"
		if ct.MemoryLimit > 0 {
			limit = formatBytes(float64(ct.MemoryLimit))
		}
		io, net := "-", "-"
		if ct.IOReadRate != nil || ct.IOWriteRate != nil {
			io = rate(ct.IOReadRate) + " / " + rate(ct.IOWriteRate)
		}
		if ct.NetRxRate != nil || ct.NetTxRate != nil {
			net = rate(ct.NetRxRate) + " / " + rate(ct.NetTxRate)
		}
		t.row(dash(ct.Name), dash(ct.Image), dash(pod), strconv.FormatFloat(float64(ct.CPUPercent), 'f', 1, 64), throttled,
			formatBytes(float64(ct.MemoryWorkingSet)), limit, strconv.FormatUint(ct.OOMKills, 10), strconv.Itoa(ct.Processes),
			io, net, ct.ID)
	}
	return t.flush()
}

// command prints a command line like ps: the arguments, or [name] for kernel threads, cut to 80
// characters.
func command(name string, args []string) string {
	s := strings.Join(args, " ")
	if strings.TrimSpace(s) == "" {
		s = "[" + name + "]"
	}
	if utf8Len := []rune(s); len(utf8Len) > 80 {
		s = string(utf8Len[:79]) + "…"
	}
	return s
}

// ---- metrics ----

func (c *CLI) metrics(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/metrics"
	var ans apiwire.MetricsAnswer
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, "match", o.match); !ok || err != nil {
		return err
	}
	return c.seriesTable(ans.Series, o.match)
}

// seriesTable prints latest values sorted by series name (shared by metrics and values).
func (c *CLI) seriesTable(ss []apiwire.Series, match string) error {
	if len(ss) == 0 {
		return c.noSeries(match)
	}
	type row struct{ name, kind, value, rate string }
	rows := make([]row, 0, len(ss))
	for _, s := range ss {
		r := row{name: seriesName(s.Labels), kind: s.Kind, rate: "-"}
		unit := s.Labels["unit"]
		if s.Kind == "state" {
			switch text := s.Text; {
			case s.Since == 0 && text == "":
				r.value = "-"
			case s.Since == 0:
				r.value = strconv.Quote(text)
			default:
				r.value = strconv.Quote(text) + " since " + c.age(s.Since)
			}
		} else {
			r.value = withUnit(s.Value, unit)
			if s.Rate.Valid {
				r.rate = withUnit(s.Rate, unit) + "/s"
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	t := newTable(c.Stdout, "SERIES", "KIND", "VALUE", "RATE")
	for _, r := range rows {
		t.row(r.name, r.kind, r.value, r.rate)
	}
	return t.flush()
}

func (c *CLI) noSeries(match string) error {
	if match == "" {
		match = "{}"
	}
	_, err := fmt.Fprintf(c.Stderr, "no series match %s\n", clean(match))
	return err
}

// ---- history ----

// byName returns the series' names (seriesName of labels(i)) and the indexes 0..n-1 in the
// order of those names.
func byName(n int, labels func(i int) series.Labels) (order []int, names []string) {
	names = make([]string, n)
	order = make([]int, n)
	for i := range order {
		names[i] = seriesName(labels(i))
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	return order, names
}

func (c *CLI) history(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/history"
	fn := ""
	if o.rate {
		fn = "rate"
	}
	var ans apiwire.HistoryAnswer
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, "match", o.match, "window", o.window, "fn", fn); !ok || err != nil {
		return err
	}
	if len(ans.Series) == 0 {
		return c.noSeries(o.match)
	}
	ss := ans.Series
	order, names := byName(len(ss), func(i int) series.Labels { return ss[i].Labels })
	for n, i := range order {
		s := ss[i]
		if n > 0 {
			fmt.Fprintln(c.Stdout)
		}
		what := s.Kind
		unit := s.Labels["unit"]
		suffix := ""
		if s.Fn == "rate" || (o.rate && s.Kind == "counter") {
			what += ", per second"
			suffix = "/s"
		}
		fmt.Fprintf(c.Stdout, "%s (%s, %d points)\n", clean(names[i]), what, len(s.Points))
		t := newTable(c.Stdout, "TIME", "VALUE")
		maxStep := gapBound(s.Points)
		for j, p := range s.Points {
			if j > 0 && maxStep > 0 && p.TS-s.Points[j-1].TS > maxStep {
				t.row("…", "(no data for "+formatDuration(time.Duration(p.TS-s.Points[j-1].TS)*time.Millisecond)+")")
			}
			t.row(time.UnixMilli(p.TS).In(c.loc()).Format("15:04:05"), withUnit(p.Value, unit)+suffix)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// gapBound returns 2.5 times the median step of pts in ms (0 when unknown): a longer step is
// shown as a gap.
func gapBound(pts []apiwire.Point) int64 {
	if len(pts) < 3 {
		return 0
	}
	steps := make([]int64, 0, len(pts)-1)
	for i := 1; i < len(pts); i++ {
		steps = append(steps, pts[i].TS-pts[i-1].TS)
	}
	slices.Sort(steps)
	return steps[len(steps)/2] * 5 / 2
}

// ---- stats ----

func (c *CLI) stats(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/stats"
	fn := ""
	if o.rate {
		fn = "rate"
	}
	var ans apiwire.StatsAnswer
	if ok, err := c.fetchInto(ctx, a, o, &ans, path, "match", o.match, "window", o.window, "fn", fn); !ok || err != nil {
		return err
	}
	if len(ans.Series) == 0 {
		return c.noSeries(o.match)
	}
	ss := ans.Series
	order, names := byName(len(ss), func(i int) series.Labels { return ss[i].Labels })
	t := newTable(c.Stdout, "SERIES", "COUNT", "MIN", "MAX", "MEAN", "MEDIAN", "P90", "P95", "P99", "SLOPE/S")
	for _, i := range order {
		s := ss[i]
		unit := s.Labels["unit"]
		v := func(n num) string {
			if unit == "bytes" && n.Valid && !math.IsNaN(n.F) {
				return formatBytes(n.F)
			}
			if n.Valid && math.IsNaN(n.F) {
				return "-"
			}
			return numString(n)
		}
		t.row(names[i], strconv.FormatInt(s.Count, 10), v(s.Min), v(s.Max), v(s.Mean), v(s.Median), v(s.P90), v(s.P95), v(s.P99), v(s.Slope))
	}
	return t.flush()
}

// ---- peers ----

func (c *CLI) peers(ctx context.Context, a *agent, o options) error {
	const path = "/api/v1/peers"
	var ans struct {
		Peers []apiwire.Peer `json:"peers"`
	}
	if ok, err := c.fetchInto(ctx, a, o, &ans, path); !ok || err != nil {
		return err
	}
	if len(ans.Peers) == 0 {
		_, err := fmt.Fprintln(c.Stderr, "no peers known (gossip is off, or no other agent was added)")
		return err
	}
	ps := ans.Peers
	slices.SortFunc(ps, func(a, b apiwire.Peer) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Addr, b.Addr))
	})
	t := newTable(c.Stdout, "NAME", "ADDR", "HTTP", "STATUS", "RTT", "LAST SEEN", "ID")
	for _, p := range ps {
		rtt := "-"
		if p.RTTMs.Valid && !math.IsNaN(p.RTTMs.F) {
			rtt = formatDuration(time.Duration(p.RTTMs.F * float64(time.Millisecond)))
		}
		t.row(orDash(p.Name), orDash(p.Addr), orDash(p.HTTP), orDash(p.Status), rtt, c.age(p.LastSeen), orDash(p.ID))
	}
	return t.flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
