package sysscan

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func fixtureOptions() Options {
	return Options{Proc: "testdata/proc", Sys: "testdata/sys", PageSize: 4096}
}

func TestMachineFixture(t *testing.T) {
	m := NewMachine(fixtureOptions())
	r := series.NewRecorder()
	if err := m.Collect(context.Background(), r); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	u := func(v uint64) uint64 { return v }
	f := func(v float64) uint64 { return math.Float64bits(v) }
	want := map[string]uint64{
		`{"metric":"cpu.user_ms"}`:                                 u(73940),
		`{"metric":"cpu.steal_ms"}`:                                u(20),
		`{"cpu":"1","metric":"cpu.idle_ms"}`:                       u(306890),
		`{"metric":"system.context_switches"}`:                     u(443898),
		`{"metric":"system.forks"}`:                                u(8105),
		`{"metric":"system.procs_running"}`:                        u(3),
		`{"metric":"system.load_avg_5min"}`:                        f(0.46),
		`{"metric":"system.tasks_total"}`:                          u(87),
		`{"metric":"system.uptime_s"}`:                             f(370.95),
		`{"metric":"system.files.max"}`:                            u(2466167),
		`{"metric":"memory.MemTotal"}`:                             u(24683620 * 1024),
		`{"metric":"memory.HugePages_Total"}`:                      u(2),
		`{"interface":"eth0","metric":"net.interface.tx.carrier"}`: u(11),
		`{"interface":"lo","metric":"net.interface.rx.bytes"}`:     u(3193),
		`{"metric":"net.Tcp.MaxConn"}`:                             uint64(math.MaxUint64), // -1 as a level
		`{"metric":"net.Tcp.ActiveOpens"}`:                         u(17),
		`{"metric":"net.TcpExt.ListenDrops"}`:                      u(7),
		`{"device":"vda","metric":"disk.read.bytes"}`:              u(961658 * 512),
		`{"device":"vda","metric":"disk.in_progress"}`:             u(2),
		`{"device":"vda","metric":"disk.flush.time_ms"}`:           u(9),
		`{"device":"vda1","metric":"disk.weighted_io_time_ms"}`:    u(9),
		`{"metric":"tcp.sockets","state":"listen"}`:                u(3),
		`{"metric":"tcp.sockets","state":"established"}`:           u(3),
		`{"metric":"tcp.sockets","state":"time_wait"}`:             u(1),
		`{"metric":"tcp.sockets","state":"close_wait"}`:            u(0),
		`{"metric":"tcp.tx_queue"}`:                                u(16),
		`{"metric":"tcp.rx_queue"}`:                                u(3),
		`{"metric":"tcp.listen.sockets","port":"22"}`:              u(2),
		`{"metric":"tcp.listen.queue","port":"22"}`:                u(3),
		`{"metric":"tcp.listen.established","port":"22"}`:          u(1),
		`{"metric":"tcp.listen.established","port":"8080"}`:        u(1),
		`{"metric":"tcp.uid.sockets","uid":"0"}`:                   u(3),
		`{"metric":"tcp.uid.sockets","uid":"1000"}`:                u(2),
		`{"metric":"tcp.uid.sockets","uid":"1001"}`:                u(1),
	}
	for k, v := range want {
		got, ok := r.Values[k]
		if !ok {
			t.Errorf("series %s missing", k)
		} else if got != v {
			t.Errorf("series %s = %d; want %d", k, got, v)
		}
	}
	kinds := map[string]series.Kind{
		`{"metric":"cpu.user_ms"}`:                     series.Counter,
		`{"metric":"system.load_avg_5min"}`:            series.Float,
		`{"metric":"net.Tcp.CurrEstab"}`:               series.Level,
		`{"metric":"net.Tcp.ActiveOpens"}`:             series.Counter,
		`{"metric":"memory.MemFree"}`:                  series.Level,
		`{"device":"vda","metric":"disk.in_progress"}`: series.Level,
	}
	for k, kind := range kinds {
		if ref := r.Refs()[k]; ref == nil || ref.Kind != kind {
			t.Errorf("series %s: kind %v; want %v", k, ref, kind)
		}
	}
	for k := range r.Values {
		ref := r.Refs()[k]
		if d := ref.Labels["device"]; d == "loop0" || d == "ram0" {
			t.Errorf("series %s: ram and loop devices must be skipped", k)
		}
		if _, ok := ref.Labels["port"]; ok && ref.Labels["port"] != "22" && ref.Labels["port"] != "8080" {
			t.Errorf("series %s: only listening ports get per-port series", k)
		}
	}
}

func TestMachineMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loadavg"), []byte("0.5 0.4 0.3 2/10 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "uptime"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := series.NewRecorder()
	if err := NewMachine(Options{Proc: dir}).Collect(context.Background(), r); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if got := r.Values[`{"metric":"system.load_avg_1min"}`]; got != math.Float64bits(0.5) {
		t.Errorf("load still collected when other files are missing: got %v", math.Float64frombits(got))
	}
	for _, src := range []string{"stat", "meminfo", "uptime", "net/dev", "diskstats", "net/tcp"} {
		if len(r.Problems[filepath.Join(dir, src)]) == 0 {
			t.Errorf("no problem reported for %s; problems: %v", src, r.Problems)
		}
	}
	if err := NewMachine(Options{Proc: filepath.Join(dir, "nope")}).Collect(context.Background(), r); err == nil {
		t.Errorf("Collect with a missing proc root: nil error")
	}
}

// copyTree copies a fixture directory so that a test may change it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := os.CopyFS(dst, os.DirFS(src))
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// replaceField replaces kfile.Field n (1-based, proc(5) numbering) of a stat line without a space in
// its comm... or with one: it counts from the closing parenthesis.
func replaceField(stat string, n int, v string) string {
	i := len(stat) - 1
	for stat[i] != ')' {
		i--
	}
	fields := splitSpace(stat[i+2:])
	fields[n-3] = v
	out := stat[:i+2]
	for j, f := range fields {
		if j > 0 {
			out += " "
		}
		out += f
	}
	return out + "\n"
}

func splitSpace(s string) []string {
	var out []string
	for len(s) > 0 {
		j := 0
		for j < len(s) && s[j] != ' ' {
			j++
		}
		out = append(out, s[:j])
		if j == len(s) {
			break
		}
		s = s[j+1:]
	}
	return out
}

func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewMachine(fixtureOptions()).Collect(ctx, series.NewRecorder()); err == nil {
		t.Errorf("Machine.Collect with a cancelled context: nil error")
	}
}

// countingSink counts Series calls.
type countingSink struct {
	*series.Recorder
	calls int
}

func (c *countingSink) Series(l series.Labels, k series.Kind) *series.Ref {
	c.calls++
	return c.Recorder.Series(l, k)
}

func TestMachineStableRefs(t *testing.T) {
	m := NewMachine(fixtureOptions())
	defer m.Close()
	r := &countingSink{Recorder: series.NewRecorder()}
	if err := m.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	first := r.calls
	if first != len(r.Refs()) {
		t.Errorf("%d Series calls for %d series: the same series was registered twice", first, len(r.Refs()))
	}
	for range 3 {
		if err := m.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if r.calls != first {
		t.Errorf("later scans called Sink.Series %d more times; want cached Refs", r.calls-first)
	}
}

func TestMachineDropsVanished(t *testing.T) {
	proc := copyTree(t, "testdata/proc")
	m := NewMachine(Options{Proc: proc, TCPEvery: 1})
	r := series.NewRecorder()
	if err := m.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(m.ifs) != 2 || len(m.tcp.portRefs) != 2 || len(m.tcp.uidRefs) != 3 {
		t.Fatalf("interfaces %d, ports %d, uids %d", len(m.ifs), len(m.tcp.portRefs), len(m.tcp.uidRefs))
	}
	m.Close() // the files are rewritten below: reopen them
	dev := "Inter-|\n face |\n    lo:    1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"
	tcp := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1\n"
	for name, c := range map[string]string{"net/dev": dev, "net/tcp": tcp} {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(proc, "net/tcp6")); err != nil {
		t.Fatal(err)
	}
	if err := m.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(m.ifs) != 1 || len(m.tcp.portRefs) != 1 || len(m.tcp.uidRefs) != 1 {
		t.Errorf("after churn: interfaces %d, ports %d, uids %d; want 1, 1, 1", len(m.ifs), len(m.tcp.portRefs), len(m.tcp.uidRefs))
	}
	if v := r.Values[`{"metric":"tcp.sockets","state":"established"}`]; v != 0 {
		t.Errorf("established = %d after the connections closed", v)
	}
}

// TestProcSourcesTable: every entry of the one table of sources names a file and is read by
// exactly one collector, and no file is listed twice (it would be read twice a scan).
func TestProcSourcesTable(t *testing.T) {
	names := map[string]bool{}
	for i, src := range procSources {
		if src.name == "" {
			t.Errorf("source %d has no file name", i)
		}
		if (src.machine == nil) == (src.system == nil) {
			t.Errorf("source %s: read by machine %v, by system %v; want exactly one", src.name, src.machine != nil, src.system != nil)
		}
		if names[src.name] {
			t.Errorf("source %s listed twice", src.name)
		}
		names[src.name] = true
	}
}
