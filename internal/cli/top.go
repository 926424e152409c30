package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// `cantal top`: a live view of a node, refreshed every --interval (2 s, the agent's scan) from
// the agent's API — /api/v1/status, /api/v1/metrics (the machine's CPU, memory, load, network
// and disk series) and /api/v1/processes — drawn with plain ANSI escapes on the terminal's
// alternate screen (no TUI library: a full redraw of at most a screenful of lines per refresh
// needs only "home", "erase line" and "erase below"). Keys: q quits, c sorts processes by CPU,
// m by memory. It works against every kind of agent the other commands reach (https, basic
// auth, client certificates, unix:PATH), since it only makes their GET requests.

// topSelector picks the machine series the header needs: per-mode CPU time (all CPUs),
// memory, load, tasks and the byte counters of network interfaces and disks; no per-process
// or per-CPU series.
const topSelector = `{metric=~"cpu\\.[a-z_]+_ms|memory\\.(MemTotal|MemAvailable|SwapTotal|SwapFree)|system\\.(load_avg_1min|load_avg_5min|load_avg_15min|tasks_total|procs_running|uptime_s)|net\\.interface\\.(rx|tx)\\.bytes|disk\\.(read|write)\\.bytes", pid="", cpu=""}`

// topFrame is what one refresh shows.
type topFrame struct {
	node     string
	at       time.Time
	vals     map[string]float64 // latest value by metric name (unlabelled series)
	rates    map[string]float64 // per-second rate by metric name, summed over devices
	hasRate  map[string]bool
	procs    []apiwire.Process
	nprocs   int
	fetchErr string
}

// cpuModes are the modes of cpu.<mode>_ms that add up to the CPUs' time (guest time is already
// counted in user and nice).
var cpuModes = []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

func (c *CLI) topFetch(ctx context.Context, a *agent, o options) (*topFrame, error) {
	f := &topFrame{at: c.now(), vals: map[string]float64{}, rates: map[string]float64{}, hasRate: map[string]bool{}}
	var st apiwire.Status
	body, err := a.get(ctx, "/api/v1/status")
	if err != nil {
		return nil, err
	}
	if err := decode(body, "/api/v1/status", &st); err != nil {
		return nil, err
	}
	f.node, f.nprocs = st.NodeName, st.Counts.Processes
	body, err = a.get(ctx, "/api/v1/metrics", "match", topSelector)
	if err != nil {
		return nil, err
	}
	var ms apiwire.MetricsAnswer
	if err := decode(body, "/api/v1/metrics", &ms); err != nil {
		return nil, err
	}
	devices := map[string][]string{}
	for _, s := range ms.Series {
		if dev := s.Labels["device"]; dev != "" {
			devices[s.Labels["metric"]] = append(devices[s.Labels["metric"]], dev)
		}
	}
	for _, s := range ms.Series {
		m := s.Labels["metric"]
		if ifc := s.Labels["interface"]; ifc == "lo" {
			continue
		}
		if dev := s.Labels["device"]; dev != "" && partition(dev, devices[m]) {
			continue // counted in its disk
		}
		if s.Value.Valid {
			f.vals[m] += s.Value.F
		}
		if s.Rate.Valid && !math.IsNaN(s.Rate.F) {
			f.rates[m] += s.Rate.F
			f.hasRate[m] = true
		}
	}
	body, err = a.get(ctx, "/api/v1/processes")
	if err != nil {
		return nil, err
	}
	var ps apiwire.ProcessesAnswer
	if err := decode(body, "/api/v1/processes", &ps); err != nil {
		return nil, err
	}
	f.procs = ps.Processes
	return f, nil
}

// partition reports whether dev is a partition of another device in devs (sda1 of sda,
// nvme0n1p2 of nvme0n1), or a loop or ram device, which top leaves out of the disk rates.
func partition(dev string, devs []string) bool {
	if strings.HasPrefix(dev, "loop") || strings.HasPrefix(dev, "ram") {
		return true
	}
	for _, d := range devs {
		if d == dev || !strings.HasPrefix(dev, d) {
			continue
		}
		rest := strings.TrimPrefix(dev[len(d):], "p")
		if rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// render draws the frame as at most height lines of at most width columns.
func (f *topFrame) render(width, height int, sortBy string, loc *time.Location) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	up := "-"
	if v, ok := f.vals["system.uptime_s"]; ok {
		up = formatDuration(time.Duration(v) * time.Second)
	}
	add("cantal top - %s  %s  up %s  (q quit, c cpu, m memory)", f.node, f.at.In(loc).Format("15:04:05"), up)
	// CPU.
	total := 0.0
	for _, m := range cpuModes {
		total += f.rates["cpu."+m+"_ms"]
	}
	if total > 0 {
		pct := func(m string) float64 { return 100 * f.rates["cpu."+m+"_ms"] / total }
		busy := 100 - pct("idle") - pct("iowait")
		add("CPU  %5.1f%% busy  user %.1f  sys %.1f  iowait %.1f  irq %.1f  steal %.1f  (%.0f CPUs)",
			busy, pct("user")+pct("nice"), pct("system"), pct("iowait"), pct("irq")+pct("softirq"), pct("steal"), math.Round(total/1000))
	} else {
		add("CPU  -  (a rate needs two scans)")
	}
	memTotal, memAvail := f.vals["memory.MemTotal"], f.vals["memory.MemAvailable"]
	if memTotal > 0 {
		used := memTotal - memAvail
		swap := "no swap"
		if st := f.vals["memory.SwapTotal"]; st > 0 {
			swap = "swap " + formatBytes(st-f.vals["memory.SwapFree"]) + " / " + formatBytes(st)
		}
		add("Mem  %s used / %s (%.1f%%)  available %s  %s", formatBytes(used), formatBytes(memTotal), 100*used/memTotal, formatBytes(memAvail), swap)
	} else {
		add("Mem  -")
	}
	add("Load %s %s %s  tasks %s, %s running", orNum(f.vals, "system.load_avg_1min"), orNum(f.vals, "system.load_avg_5min"),
		orNum(f.vals, "system.load_avg_15min"), orNum(f.vals, "system.tasks_total"), orNum(f.vals, "system.procs_running"))
	add("Net  rx %s  tx %s    Disk  read %s  write %s", rateOf(f, "net.interface.rx.bytes"), rateOf(f, "net.interface.tx.bytes"),
		rateOf(f, "disk.read.bytes"), rateOf(f, "disk.write.bytes"))
	add("")
	ps := slices.Clone(f.procs)
	slices.SortStableFunc(ps, func(a, b apiwire.Process) int {
		if sortBy == "rss" {
			return cmp.Or(cmp.Compare(b.RSS, a.RSS), cmp.Compare(b.CPUPercent, a.CPUPercent), cmp.Compare(a.PID, b.PID))
		}
		return cmp.Or(cmp.Compare(b.CPUPercent, a.CPUPercent), cmp.Compare(b.RSS, a.RSS), cmp.Compare(a.PID, b.PID))
	})
	add("%-8s %-6s %1s %4s %6s %9s  %s", "PID", "UID", "S", "THR", "CPU%", "RSS", "COMMAND")
	for _, p := range ps {
		if len(lines) >= height {
			break
		}
		cpu, rss := strconv.FormatFloat(p.CPUPercent, 'f', 1, 64), formatBytes(float64(p.RSS))
		add("%-8d %-6d %1s %4d %6s %9s  %s", p.PID, p.UID, clean(p.State), p.Threads, cpu, rss, clean(command(p.Name, p.Cmdline)))
	}
	if len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		lines[i] = cut(l, width)
	}
	return lines
}

func orNum(vals map[string]float64, m string) string {
	v, ok := vals[m]
	if !ok {
		return "-"
	}
	return formatFloat(v)
}

func rateOf(f *topFrame, m string) string {
	if !f.hasRate[m] {
		return "-"
	}
	return formatBytes(f.rates[m]) + "/s"
}

// cut shortens s to width runes.
func cut(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width])
}

// ANSI escapes of the full-screen view.
const (
	escAltScreen   = "\x1b[?1049h\x1b[?25l" // alternate screen, cursor hidden
	escMainScreen  = "\x1b[?25h\x1b[?1049l"
	escHome        = "\x1b[H"
	escEraseLine   = "\x1b[K"
	escEraseBelow  = "\x1b[J"
	defaultWidth   = 80
	defaultHeight  = 24
	topMinInterval = 200 * time.Millisecond
)

func (c *CLI) top(ctx context.Context, a *agent, o options) error {
	interval := 2 * time.Second
	if o.interval != "" {
		d, err := time.ParseDuration(o.interval)
		if err != nil || d < topMinInterval {
			return usagef("top: --interval %q: want a duration of at least %s", o.interval, topMinInterval)
		}
		interval = d
	}
	sortBy := o.sort
	if sortBy == "pid" && !o.conn.flagged["sort"] {
		sortBy = "cpu"
	}
	out, _ := c.Stdout.(*os.File)
	tty := out != nil && isTerminal(out)
	size := func() (int, int) {
		if tty {
			if w, h, ok := termSize(out); ok {
				return w, h
			}
		}
		w, _ := strconv.Atoi(c.getenv("COLUMNS"))
		h, _ := strconv.Atoi(c.getenv("LINES"))
		return cmp.Or(w, defaultWidth), cmp.Or(h, defaultHeight)
	}
	if o.once || !tty {
		// One frame as plain text (a pipe or --once): no escapes, no keys.
		f, err := c.topFetch(ctx, a, o)
		if err != nil {
			return err
		}
		w, h := size()
		if !tty {
			h = math.MaxInt32 // every process
		}
		_, err = io.WriteString(c.Stdout, strings.Join(f.render(w, h, sortBy, c.loc()), "\n")+"\n")
		return err
	}

	// A first fetch outside the full screen: an agent that cannot be reached or refuses the
	// credentials is reported as the other commands report it.
	first, err := c.topFetch(ctx, a, o)
	if err != nil {
		return err
	}
	in, _ := c.stdin().(*os.File)
	keys := make(chan byte, 16)
	kctx, stopKeys := context.WithCancel(ctx)
	defer stopKeys()
	if in != nil {
		restore, err := rawInput(in)
		if err == nil {
			defer restore()
		}
		go readKeys(kctx, in, keys)
	}
	io.WriteString(c.Stdout, escAltScreen)
	defer io.WriteString(c.Stdout, escMainScreen)

	last := first
	var lastErr error
	draw := func() {
		w, h := size()
		var b strings.Builder
		b.WriteString(escHome)
		var lines []string
		if last != nil {
			lines = last.render(w, h, sortBy, c.loc())
		}
		if lastErr != nil {
			msg := cut("cantal top: "+clean(lastErr.Error())+" (retrying)", w)
			if len(lines) == 0 {
				lines = []string{msg}
			} else {
				lines[len(lines)-1] = msg
			}
		}
		for i, l := range lines {
			if i > 0 {
				b.WriteString("\r\n")
			}
			b.WriteString(l)
			b.WriteString(escEraseLine)
		}
		b.WriteString(escEraseBelow)
		io.WriteString(c.Stdout, b.String())
	}
	refresh := func() {
		fctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
		f, err := c.topFetch(fctx, a, o)
		cancel()
		if err == nil {
			last = f
		}
		lastErr = err
		draw()
	}
	draw()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C: leave quietly
		case <-tick.C:
			refresh()
		case k := <-keys:
			switch k {
			case 'q', 'Q', 3, 4: // q, Ctrl-C and Ctrl-D when the terminal delivers them as bytes
				return nil
			case 'c', 'P':
				sortBy = "cpu"
				draw()
			case 'm', 'M':
				sortBy = "rss"
				draw()
			}
		}
	}
}

func (c *CLI) stdin() io.Reader {
	if c.Stdin != nil {
		return c.Stdin
	}
	return os.Stdin
}
