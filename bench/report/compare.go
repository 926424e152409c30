package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// compareOpts configures the side-by-side run.
type compareOpts struct {
	Agent, Netdata, NodeExporter string
	Dur, Warmup                  time.Duration
	Dir                          string
	Port                         int // agent; netdata Port+1, Port+2; node_exporter Port+3
}

// monitorResult is one monitor's figures over the measured window.
type monitorResult struct {
	Name, Interval  string
	CPU             time.Duration
	Window          time.Duration
	RSSPeak, RSSEnd uint64
	Procs           int
	Samples         float64
	Note            string
}

func (m monitorResult) cpuPerSample() float64 {
	if m.Samples == 0 {
		return 0
	}
	return m.CPU.Seconds() / m.Samples * 1e6 // µs
}

// netdataConf writes a config for an unprivileged foreground netdata with every directory in
// dir, its own port, and Debian's stock plugin configuration.
func netdataConf(dir string, port, every int) (string, error) {
	for _, d := range []string{"etc", "log", "cache", "lib", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", ".opt-out-from-anonymous-statistics"), nil, 0o644); err != nil {
		return "", err
	}
	conf := fmt.Sprintf(`[global]
	hostname = bench-netdata-%[3]d
	update every = %[3]d
[db]
	update every = %[3]d
	mode = dbengine
[directories]
	config = %[1]s/etc
	stock config = /usr/lib/netdata/conf.d
	log = %[1]s/log
	cache = %[1]s/cache
	lib = %[1]s/lib
	home = %[1]s
	plugins = /usr/lib/netdata/plugins.d
	web = /usr/share/netdata/web
[logs]
	debug log = none
	error log = %[1]s/log/error.log
	access log = none
[web]
	bind to = 127.0.0.1:%[2]d
[registry]
	enabled = no
[cloud]
	enabled = no
[health]
	enabled = yes
`, dir, port, every)
	p := filepath.Join(dir, "netdata.conf")
	return p, os.WriteFile(p, []byte(conf), 0o644)
}

// chownTree gives dir and everything in it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// netdataRate is the number of values netdata collects per second: for every chart, its
// dimensions divided by the chart's update_every (from /api/v1/charts).
func netdataRate(ctx context.Context, port int) (float64, int, error) {
	var ans struct {
		Charts map[string]struct {
			UpdateEvery int            `json:"update_every"`
			Dimensions  map[string]any `json:"dimensions"`
		} `json:"charts"`
	}
	if err := getJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/api/v1/charts", port), &ans); err != nil {
		return 0, 0, err
	}
	var rate float64
	dims := 0
	for _, c := range ans.Charts {
		ue := c.UpdateEvery
		if ue <= 0 {
			ue = 1
		}
		rate += float64(len(c.Dimensions)) / float64(ue)
		dims += len(c.Dimensions)
	}
	if dims == 0 {
		return 0, 0, errNotYet
	}
	return rate, dims, nil
}

// countSamples counts the sample lines of a Prometheus text exposition.
func countSamples(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("exposition: %w", err)
	}
	return n, nil
}

// scrapeLoop scrapes url every period until ctx ends, as Prometheus would, and counts samples.
type scrapeLoop struct {
	scrapes, samples, failures int
	done                       chan struct{}
}

func startScrapes(ctx context.Context, url string, period time.Duration) *scrapeLoop {
	s := &scrapeLoop{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n, err := func() (int, error) {
				c, cancel := context.WithTimeout(ctx, period)
				defer cancel()
				req, _ := http.NewRequestWithContext(c, http.MethodGet, url, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return 0, fmt.Errorf("%s", resp.Status)
				}
				return countSamples(resp.Body)
			}()
			if err != nil {
				if ctx.Err() == nil {
					s.failures++
				}
				continue
			}
			s.scrapes++
			s.samples += n
		}
	}()
	return s
}

func lookupUser(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// netdataVersion is the first line of bin's version output.
func netdataVersion(bin, flag string) string {
	out, err := exec.Command(bin, flag).CombinedOutput()
	if err != nil {
		return "?"
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first
}

// runCompare runs the agent, netdata at 1 s and 2 s and node_exporter side by side and returns
// the markdown section.
func runCompare(ctx context.Context, o compareOpts) (string, error) {
	var md strings.Builder
	loadStart := loadavg()
	uid, gid, err := lookupUser("netdata")
	if err != nil {
		return "", err
	}
	var kids []*child
	defer func() {
		for _, k := range kids {
			k.Stop(15 * time.Second)
		}
	}()
	ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, "--interval", "2s", "--state-dir", filepath.Join(o.Dir, "agent-state"))
	if err != nil {
		return "", err
	}
	kids = append(kids, ag.child)
	type nd struct {
		every, port int
		c           *child
		rate0       float64
	}
	nds := []*nd{{every: 1, port: o.Port + 1}, {every: 2, port: o.Port + 2}}
	for _, n := range nds {
		dir := filepath.Join(o.Dir, fmt.Sprintf("netdata-%ds", n.every))
		conf, err := netdataConf(dir, n.port, n.every)
		if err != nil {
			return "", fmt.Errorf("netdata config: %w", err)
		}
		if err := chownTree(dir, uid, gid); err != nil {
			return "", fmt.Errorf("netdata dir: %w", err)
		}
		c, err := spawn(fmt.Sprintf("netdata-%ds", n.every), filepath.Join(o.Dir, fmt.Sprintf("netdata-%ds.out", n.every)),
			[]string{"DO_NOT_TRACK=1", "HOME=" + dir}, uid, gid,
			o.Netdata, "-D", "-c", conf, "-p", strconv.Itoa(n.port), "-i", "127.0.0.1")
		if err != nil {
			return "", err
		}
		kids = append(kids, c)
		n.c = c
	}
	ne, err := spawn("node_exporter", filepath.Join(o.Dir, "node_exporter.out"), nil, uid, gid,
		o.NodeExporter, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", o.Port+3))
	if err != nil {
		return "", err
	}
	kids = append(kids, ne)
	for _, n := range nds {
		port := n.port
		if err := waitFor(ctx, 90*time.Second, fmt.Sprintf("netdata on %d", port), func() error {
			_, _, err := netdataRate(ctx, port)
			return err
		}); err != nil {
			return "", err
		}
	}
	neURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", o.Port+3)
	if err := waitFor(ctx, 30*time.Second, "node_exporter", func() error {
		var x struct{}
		err := getJSON(ctx, neURL, &x)
		if err != nil && strings.Contains(err.Error(), "decode") {
			return nil // it answered (with text, not JSON)
		}
		return err
	}); err != nil {
		return "", err
	}
	// Warm-up: netdata starts its plugins, the agent registers every series.
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(o.Warmup):
	}
	for _, n := range nds {
		n.rate0, _, _ = netdataRate(ctx, n.port)
	}
	samplers := map[string]*sampler{}
	for _, k := range kids {
		samplers[k.name] = newSampler(k.Pid(), time.Second)
	}
	defer func() {
		for _, s := range samplers {
			s.Stop()
		}
	}()
	start := map[string]treeUsage{}
	for name, s := range samplers {
		start[name] = s.Now()
	}
	// The agent's status is read only at the window's ends: polling it during the window would
	// add the status handler's CPU to the agent's, a cost Netdata is not charged.
	st0, err := ag.Status(ctx)
	if err != nil {
		return "", err
	}
	sctx, scancel := context.WithCancel(ctx)
	sl := startScrapes(sctx, neURL, 2*time.Second)
	t0 := time.Now()
	select {
	case <-ctx.Done():
		scancel()
		return "", ctx.Err()
	case <-time.After(o.Dur):
	}
	window := time.Since(t0)
	end := map[string]treeUsage{}
	for name, s := range samplers {
		end[name] = s.Now()
	}
	scancel()
	<-sl.done
	st1, err := ag.Status(ctx)
	if err != nil {
		return "", err
	}
	scans := st1.LastScan.Scans - st0.LastScan.Scans
	live := float64(st0.Counts.LiveSeries+st1.Counts.LiveSeries) / 2
	res := func(name, interval string, samples float64, note string) monitorResult {
		return monitorResult{Name: name, Interval: interval, CPU: end[name].CPU - start[name].CPU, Window: window,
			RSSPeak: samplers[name].Peak(), RSSEnd: end[name].RSS, Procs: end[name].Procs, Samples: samples, Note: note}
	}
	var rows []monitorResult
	rows = append(rows, res("cantal-agent", "2 s", float64(scans)*live,
		fmt.Sprintf("%d scans × %.0f live series (mean of start and end: %d, %d)", scans, live, st0.Counts.LiveSeries, st1.Counts.LiveSeries)))
	for _, n := range nds {
		rate1, dims, err := netdataRate(ctx, n.port)
		if err != nil {
			return "", fmt.Errorf("netdata %ds at the end: %w", n.every, err)
		}
		rate := (n.rate0 + rate1) / 2
		rows = append(rows, res(n.c.name, fmt.Sprintf("%d s", n.every), rate*window.Seconds(),
			fmt.Sprintf("%d dimensions, %.0f values/s (/api/v1/charts)", dims, rate)))
	}
	rows = append(rows, res("node_exporter", "2 s (scrape)", float64(sl.samples),
		fmt.Sprintf("%d scrapes × %.0f samples, %d failed; scraper CPU not counted", sl.scrapes, float64(sl.samples)/max(1, float64(sl.scrapes)), sl.failures)))

	fmt.Fprintf(&md, "## 1. Agent vs Netdata vs node_exporter\n\n")
	fmt.Fprintf(&md, "All four ran at the same time on the same host, measured over the same %s window after a %s warm-up. "+
		"Load average at start: %s; at end: %s. Netdata %s (Debian), default plugins; node_exporter %s (Debian), default collectors, scraped every 2 s by the report's own loop.\n\n",
		window.Round(time.Second), o.Warmup, loadStart, loadavg(), netdataVersion(o.Netdata, "-v"), netdataVersion(o.NodeExporter, "--version"))
	md.WriteString("| monitor | interval | CPU s | CPU % of a core | RSS peak MiB | RSS end MiB | procs | samples | samples/s | CPU µs/sample | CPU/sample vs Netdata 1 s | vs Netdata 2 s | how samples were counted |\n")
	md.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	nd1, nd2 := rows[1], rows[2]
	for _, r := range rows {
		ratio := func(o monitorResult) string {
			if o.cpuPerSample() == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f×", r.cpuPerSample()/o.cpuPerSample())
		}
		fmt.Fprintf(&md, "| %s | %s | %.1f | %.2f | %.1f | %.1f | %d | %.0f | %.0f | %.2f | %s | %s | %s |\n",
			r.Name, r.Interval, r.CPU.Seconds(), 100*r.CPU.Seconds()/window.Seconds(), mib(r.RSSPeak), mib(r.RSSEnd), r.Procs,
			r.Samples, r.Samples/window.Seconds(), r.cpuPerSample(), ratio(nd1), ratio(nd2), r.Note)
	}
	a := rows[0]
	fmt.Fprintf(&md, "\nTargets: CPU per sample ≤ 0.5× Netdata's — %s (%.2f× Netdata 1 s, %.2f× Netdata 2 s); "+
		"RSS no larger than Netdata's — %s (agent peak %.1f MiB; Netdata peak %.1f / %.1f MiB).\n\n",
		verdict(a.cpuPerSample() <= 0.5*nd1.cpuPerSample() && a.cpuPerSample() <= 0.5*nd2.cpuPerSample()),
		a.cpuPerSample()/nd1.cpuPerSample(), a.cpuPerSample()/nd2.cpuPerSample(),
		verdict(a.RSSPeak <= nd1.RSSPeak && a.RSSPeak <= nd2.RSSPeak), mib(a.RSSPeak), mib(nd1.RSSPeak), mib(nd2.RSSPeak))
	md.WriteString("CPU is utime+stime of each monitor's whole process tree from /proc (Netdata's plugins included, " +
		"children it reaped included), difference between the window's start and end. RSS is summed over the tree " +
		"(a page shared by two processes counts twice). A *sample* is one value collected at one time: the agent's " +
		"live series × scans done in the window (/api/v1/status read at the window's start and end only); Netdata's dimensions divided by each chart's " +
		"update_every × seconds; node_exporter's sample lines per scrape × scrapes. The monitors do not collect the same " +
		"series (the agent keeps per-process series for every process, Netdata's apps.plugin groups processes), so the per-sample " +
		"column is the comparable one. Netdata runs unprivileged (user `netdata`), so its apps.plugin sees less than as root; the agent runs as root.\n\n")
	return md.String(), nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}
