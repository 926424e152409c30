package bench

// BenchmarkScanContainers: the process scan's cost per container at 10, 100 and 500 containers,
// on fixture trees (a /proc of one process per container, a cgroup v2 tree with each
// container's cpu.stat, memory.* files, Podman's containers.json), beside the same scan of as
// many processes without containers: in the root cgroup (none), and each in a service cgroup
// of its own with the same files (services); containers-full are containers whose cgroups also
// have io.stat, pids.* and PSI files, as a real v2 container's has. The figure to hold to the goal (≤ 20 µs of CPU
// per container per scan) is cpu-ns/op of containers divided by the count (µs/container
// below), and less that of none: what a container adds over a bare process.
//
//	cd bench && go test -run '^$' -bench BenchmarkScanContainers -benchtime 200x .

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// ctrFixture writes the trees for n processes (pids 1000...) in the layout kind: "none" (root
// cgroup), "services" (system.slice/svc-N.service) or "containers" (libpod_parent/libpod-<id>,
// named in containers.json); "containers-full" gives each container's cgroup also the files
// a real v2 container cgroup has beside (io.stat, pids.current, pids.max and the three PSI
// files). It returns the proc, sys and runtime roots.
func ctrFixture(b *testing.B, n int, kind string) (proc, sys, root string) {
	full := strings.HasSuffix(kind, "-full")
	kind = strings.TrimSuffix(kind, "-full")
	b.Helper()
	dir := b.TempDir()
	os.Chmod(dir, 0o755)
	proc, sys, root = filepath.Join(dir, "proc"), filepath.Join(dir, "sys"), filepath.Join(dir, "root")
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		must(os.MkdirAll(filepath.Dir(path), 0o755))
		must(os.WriteFile(path, []byte(content), mode))
	}
	write(filepath.Join(proc, "stat"), "cpu  100 0 100 1000 0 0 0 0 0 0\nbtime 1700000000\n", 0o644)
	write(filepath.Join(proc, "self", "stat"), "ignored", 0o644)
	cg := filepath.Join(sys, "fs", "cgroup")
	write(filepath.Join(cg, "cgroup.controllers"), "cpu memory io pids\n", 0o644)
	var list []string
	for i := range n {
		pid := 1000 + i
		path := "/"
		switch kind {
		case "services":
			path = fmt.Sprintf("/system.slice/svc-%d.service", i)
		case "containers":
			id := fmt.Sprintf("%064x", 0xc0ffee0000+i)
			path = "/libpod_parent/libpod-" + id
			list = append(list, fmt.Sprintf(`{"id":%q,"names":["web-%d"],"image":"sha256:1","metadata":"{\"name\":\"web-%d\",\"image-name\":\"localhost/shop:1\"}"}`, id, i, i))
		}
		p := filepath.Join(proc, fmt.Sprint(pid))
		write(filepath.Join(p, "stat"), fmt.Sprintf("%d (app) S 1 %d %d 0 -1 4194560 100 0 0 0 %d 2 0 0 20 0 1 0 9000 5000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", pid, pid, pid, i), 0o644)
		write(filepath.Join(p, "status"), fmt.Sprintf("Name:\tapp\nState:\tS (sleeping)\nPid:\t%d\nPPid:\t1\nUid:\t0\t0\t0\t0\nVmRSS:\t  472 kB\nVmSwap:\t 0 kB\nThreads:\t1\n", pid), 0o644)
		write(filepath.Join(p, "cgroup"), "0::"+path+"\n", 0o644)
		write(filepath.Join(p, "cmdline"), "/app\x00-serve\x00", 0o644)
		write(filepath.Join(p, "environ"), "PATH=/bin\x00", 0o600)
		write(filepath.Join(p, "io"), "rchar: 1\nwchar: 1\nsyscr: 1\nsyscw: 1\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n", 0o600)
		if path == "/" {
			continue
		}
		c := filepath.Join(cg, path)
		write(filepath.Join(c, "cpu.stat"), "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 10\nnr_throttled 2\nthrottled_usec 500\n", 0o644)
		write(filepath.Join(c, "memory.current"), "10485760\n", 0o644)
		write(filepath.Join(c, "memory.max"), "67108864\n", 0o644)
		write(filepath.Join(c, "memory.stat"), "anon 4194304\nfile 6291456\ninactive_file 2097152\nactive_file 4194304\n", 0o644)
		write(filepath.Join(c, "memory.events"), "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n", 0o644)
		write(filepath.Join(c, "cgroup.procs"), fmt.Sprintf("%d\n", pid), 0o644)
		if full {
			write(filepath.Join(c, "io.stat"), "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n", 0o644)
			write(filepath.Join(c, "pids.current"), "1\n", 0o644)
			write(filepath.Join(c, "pids.max"), "4096\n", 0o644)
			for _, f := range []string{"cpu.pressure", "memory.pressure", "io.pressure"} {
				write(filepath.Join(c, f), "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n", 0o644)
			}
		}
	}
	if kind == "containers" {
		f := filepath.Join(root, "var/lib/containers/storage/overlay-containers/containers.json")
		must(os.MkdirAll(filepath.Dir(f), 0o700))
		for d := filepath.Dir(f); d != dir; d = filepath.Dir(d) {
			os.Chmod(d, 0o700)
		}
		must(os.WriteFile(f, []byte("["+strings.Join(list, ",")+"]"), 0o600))
	}
	return proc, sys, root
}

func BenchmarkScanContainers(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the runtime's state must be root's: run as root")
	}
	for _, n := range []int{10, 100, 500} {
		for _, kind := range []string{"none", "services", "containers", "containers-full"} {
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				proc, sys, root := ctrFixture(b, n, kind)
				p := procscan.NewProcesses(procscan.Options{Proc: proc, Sys: sys, PageSize: 4096, NoTaskIter: true,
					Containers: containers.New(containers.Options{Root: root})})
				b.Cleanup(func() { p.Close() })
				rec := series.NewRecorder()
				ctx := context.Background()
				for range 3 { // first scans: every series registered, details read
					if err := p.Collect(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
				if strings.HasPrefix(kind, "containers") {
					named := 0
					for k := range rec.Values {
						if strings.Contains(k, `"metric":"cgroup.processes"`) && strings.Contains(k, `"container":"web-`) {
							named++
						}
					}
					if named != n {
						b.Fatalf("%d containers named; want %d", named, n)
					}
				}
				sink := &series.Discard{}
				b.ReportAllocs()
				b.ResetTimer()
				start := cputime.Process()
				for b.Loop() {
					if err := p.Collect(ctx, sink); err != nil {
						b.Fatal(err)
					}
				}
				cpu := float64(cputime.Process()-start) / float64(b.N)
				b.ReportMetric(cpu, "cpu-ns/op")
				b.ReportMetric(cpu/float64(n)/1000, "cpu-µs/process")
			})
		}
	}
}
