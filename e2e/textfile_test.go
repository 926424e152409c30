package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// textfileFixture is what cron jobs write for node_exporter: families with and without HELP
// and TYPE, a histogram, camelCase labels.
const textfileFixture = `# HELP backup_age_seconds Age of the last backup.
# TYPE backup_age_seconds gauge
backup_age_seconds{job="db"} 3600
backup_age_seconds{job="home"} 7200.5
# TYPE backups_total counter
backups_total{jobName="db"} 42
# TYPE apt_upgrade_seconds histogram
apt_upgrade_seconds_bucket{le="1"} 1
apt_upgrade_seconds_bucket{le="10"} 3
apt_upgrade_seconds_bucket{le="+Inf"} 4
apt_upgrade_seconds_sum 31.5
apt_upgrade_seconds_count 4
apt_upgrades_pending{origin="Debian",arch="amd64"} 12
`

// flatten returns the series of a family as name{labels} → value, a histogram as its
// _bucket, _sum and _count series (how the agent stores and writes them).
func flatten(f *dto.MetricFamily, into map[string]float64) {
	for _, m := range f.GetMetric() {
		key := seriesKey(m)
		if h := m.GetHistogram(); h != nil && f.GetType() == dto.MetricType_HISTOGRAM {
			for _, b := range h.GetBucket() {
				le := fmt.Sprint(b.GetUpperBound())
				if math.IsInf(b.GetUpperBound(), 1) {
					le = "+Inf"
				}
				k := strings.TrimPrefix(key+",le="+le, ",")
				into[f.GetName()+"_bucket{"+k+"}"] = float64(b.GetCumulativeCount())
			}
			into[f.GetName()+"_sum{"+key+"}"] = h.GetSampleSum()
			into[f.GetName()+"_count{"+key+"}"] = float64(h.GetSampleCount())
			continue
		}
		into[f.GetName()+"{"+key+"}"] = metricValue(m)
	}
}

// TestTextfileSideBySide: the agent with --textfile-dir and node_exporter 1.5 with
// --collector.textfile.directory on the same directory: every series of the files and
// node_textfile_mtime_seconds and node_textfile_scrape_error have the same names, labels and
// values on both (a malformed file makes both say scrape_error 1 and keeps the other files);
// the files' series are in the agent's API like every other series, labelled with their file;
// the agent's /metrics has the process_* self-metrics.
func TestTextfileSideBySide(t *testing.T) {
	background(t)()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	for name, content := range map[string]string{"backup.prom": textfileFixture, "zz_broken.prom": "half_written_metric{a=\"b\n"} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ne := startNodeExporterArgs(t, "--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir)
	a := startAgent(t, "--textfile-dir", dir, "--metrics-no-timestamps")
	var af map[string]*dto.MetricFamily
	waitFor(t, 20*time.Second, func() error {
		var err error
		if af, err = scrapeFamilies(a.URL + "/metrics"); err != nil {
			return err
		}
		if af["backups_total"] == nil || af["node_textfile_scrape_error"] == nil {
			return fmt.Errorf("no textfile series on /metrics yet")
		}
		return nil
	})
	nf, err := scrapeFamilies(ne)
	if err != nil {
		t.Fatal(err)
	}
	nv, av := map[string]float64{}, map[string]float64{}
	for name, f := range nf {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") ||
			strings.HasPrefix(name, "node_scrape_") || name == "node_exporter_build_info" {
			continue
		}
		flatten(f, nv)
		if f.GetType() == dto.MetricType_COUNTER || f.GetType() == dto.MetricType_GAUGE {
			if g := af[name]; g == nil || g.GetType() != f.GetType() {
				t.Errorf("%s: type %v on the agent, %v on node_exporter", name, g.GetType(), f.GetType())
			}
		}
	}
	for _, f := range af {
		flatten(f, av)
	}
	if len(nv) < 10 {
		t.Fatalf("node_exporter has only %d textfile series: %v", len(nv), nv)
	}
	for k, v := range nv {
		if w, ok := av[k]; !ok {
			t.Errorf("%s: not on the agent (node_exporter: %v)", k, v)
		} else if w != v {
			t.Errorf("%s: agent %v, node_exporter %v", k, w, v)
		}
	}
	if nv["node_textfile_scrape_error{}"] != 1 {
		t.Errorf("node_exporter's scrape_error is not 1: the broken file is not broken")
	}
	// In the API, labelled with the file.
	ss, err := a.series("/api/v1/metrics", `{metric="backups_total"}`)
	if err != nil || len(ss) != 1 || num(ss[0].Value) != 42 || ss[0].Labels["textfile"] != filepath.Join(dir, "backup.prom") ||
		ss[0].Labels["jobName"] != "db" {
		t.Errorf("API: %+v %v", ss, err)
	}
	// In the history, a point per scan.
	waitFor(t, 20*time.Second, func() error {
		hs, err := a.series("/api/v1/history?window=1m", `{metric="backup_age_seconds",job="home"}`)
		if err != nil {
			return err
		}
		if len(hs) != 1 || len(hs[0].Points) < 3 || hs[0].Points[len(hs[0].Points)-1][1] != 7200.5 {
			return fmt.Errorf("history: %+v", hs)
		}
		return nil
	})
	// The agent's own process metrics.
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
		"process_max_fds", "process_virtual_memory_bytes", "process_start_time_seconds"} {
		if af[name] == nil || len(af[name].GetMetric()) != 1 {
			t.Errorf("no %s on the agent's /metrics", name)
		}
	}
	if st := metricValue(af["process_start_time_seconds"].GetMetric()[0]); math.Abs(st-float64(time.Now().Unix())) > 300 {
		t.Errorf("process_start_time_seconds %v", st)
	}
	if rss := metricValue(af["process_resident_memory_bytes"].GetMetric()[0]); rss < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v", rss)
	}
}
