package procscan

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/series"
)

// resTree makes a container web-1 (Docker's state) whose process 4242 is in /docker/<id> on a
// v1 (hybrid) or v2 machine, with the cgroup's I/O, tasks and pressure files, and its own
// network namespace; it returns the Processes reading it.
func resTree(t *testing.T, v2 bool) *Processes {
	t.Helper()
	p, _ := resTreeRoot(t, v2)
	return p
}

// resTreeRoot is resTree, and the runtime state's root.
func resTreeRoot(t *testing.T, v2 bool) (*Processes, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	proc, sys := copyTree(t, "testdata/proc"), copyTree(t, "testdata/sys")
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cg := filepath.Join(sys, "fs/cgroup")
	if v2 {
		write(filepath.Join(proc, "4242/cgroup"), "0::/docker/"+id+"\n")
		d := filepath.Join(cg, "unified/docker", id)
		write(filepath.Join(d, "memory.current"), "1048576\n")
		write(filepath.Join(d, "io.stat"), "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n253:1 rbytes=0 wbytes=512 rios=0 wios=1 dbytes=0 dios=0\n")
		write(filepath.Join(d, "pids.current"), "7\n")
		write(filepath.Join(d, "pids.max"), "4096\n")
		write(filepath.Join(d, "cpu.pressure"), "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n")
		write(filepath.Join(d, "memory.pressure"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=3000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2000\n")
		write(filepath.Join(d, "io.pressure"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=45000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=40000\n")
	} else {
		write(filepath.Join(proc, "4242/cgroup"), "9:blkio:/docker/"+id+"\n8:pids:/docker/"+id+"\n4:memory:/docker/"+id+"\n1:name=systemd:/\n0::/\n")
		write(filepath.Join(cg, "memory/docker", id, "memory.usage_in_bytes"), "1048576\n")
		b := filepath.Join(cg, "blkio/docker", id)
		write(filepath.Join(b, "blkio.throttle.io_service_bytes_recursive"), "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Discard 0\n8:0 Total 12288\n253:1 Read 0\n253:1 Write 512\n253:1 Total 512\nTotal 12800\n")
		write(filepath.Join(b, "blkio.throttle.io_serviced"), "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\n253:1 Read 0\n253:1 Write 1\n253:1 Total 1\nTotal 4\n")
		write(filepath.Join(cg, "pids/docker", id, "pids.current"), "7\n")
		write(filepath.Join(cg, "pids/docker", id, "pids.max"), "4096\n")
	}
	os.MkdirAll(filepath.Join(sys, "dev/block"), 0o755)
	os.Symlink("../../devices/pci0000:00/0000:00:05.0/virtio2/block/vda", filepath.Join(sys, "dev/block/8:0"))
	for pid, ns := range map[string]string{"1": "net:[4026531840]", "4242": "net:[4026532999]"} {
		os.MkdirAll(filepath.Join(proc, pid, "ns"), 0o755)
		os.Symlink(ns, filepath.Join(proc, pid, "ns/net"))
	}
	write(filepath.Join(proc, "4242/net/dev"), `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0:   12345      67    1    2    0     0          0         0     5432      21    3    4    0     0       0          0
`)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	cfg := filepath.Join(root, "var/lib/docker/containers", id, "config.v2.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	if err := os.WriteFile(cfg, []byte(`{"ID":"`+id+`","Name":"/web-1","Config":{"Image":"shop:1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return NewProcesses(Options{Proc: proc, Sys: sys, PageSize: 4096, Containers: containers.New(containers.Options{Root: root})}), root
}

// A container's block I/O per device (named from sysfs), tasks and their limit, pressure
// stall times (v2) and the counters of its network namespace's interfaces (lo left out) are
// read from its cgroup's files and its process's /proc/PID/net/dev, on v1 and v2.
func TestCgroupResources(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		name := map[bool]string{false: "v1", true: "v2"}[v2]
		t.Run(name, func(t *testing.T) {
			p := resTree(t, v2)
			r := series.NewRecorder()
			for range 2 {
				if err := p.Collect(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			key := func(metric string, extra ...string) string {
				l := series.Labels{"metric": metric, "cgroup": "docker.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					"container": "web-1", "container_id": "0123456789ab", "image": "shop:1"}
				for i := 0; i < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				b, _ := json.Marshal(l)
				return string(b)
			}
			want := map[string]uint64{
				key("cgroup.io.read_bytes", "device", "vda"):      4096,
				key("cgroup.io.write_bytes", "device", "vda"):     8192,
				key("cgroup.io.reads", "device", "vda"):           1,
				key("cgroup.io.writes", "device", "vda"):          2,
				key("cgroup.io.write_bytes", "device", "253:1"):   512,
				key("cgroup.io.writes", "device", "253:1"):        1,
				key("cgroup.pids"):                                7,
				key("cgroup.pids.limit"):                          4096,
				key("cgroup.net.rx.bytes", "interface", "eth0"):   12345,
				key("cgroup.net.rx.packets", "interface", "eth0"): 67,
				key("cgroup.net.rx.errors", "interface", "eth0"):  1,
				key("cgroup.net.rx.drop", "interface", "eth0"):    2,
				key("cgroup.net.tx.bytes", "interface", "eth0"):   5432,
				key("cgroup.net.tx.packets", "interface", "eth0"): 21,
				key("cgroup.net.tx.errors", "interface", "eth0"):  3,
				key("cgroup.net.tx.drop", "interface", "eth0"):    4,
			}
			if v2 {
				want[key("cgroup.pressure.cpu.some_ms")] = 2500
				want[key("cgroup.pressure.cpu.full_ms")] = 1000
				want[key("cgroup.pressure.memory.some_ms")] = 3
				want[key("cgroup.pressure.io.full_ms")] = 40
			}
			for k, v := range want {
				if got, ok := r.Values[k]; !ok || got != v {
					t.Errorf("%s = %d, %v; want %d", k, got, ok, v)
				}
			}
			if _, ok := r.Values[key("cgroup.net.rx.bytes", "interface", "lo")]; ok {
				t.Error("lo counted")
			}
			if len(r.Problems) > 0 {
				t.Errorf("problems: %v", r.Problems)
			}
		})
	}
}

// A process in the host's network namespace (a container run with --network host) gives no
// network series: its interfaces are the machine's.
func TestCgroupNetworkHostNamespace(t *testing.T) {
	p := resTree(t, true)
	ns := filepath.Join(p.opt.Proc, "4242/ns/net")
	os.Remove(ns)
	os.Symlink("net:[4026531840]", ns)
	r := series.NewRecorder()
	for range 2 {
		p.Collect(context.Background(), r)
	}
	for k := range r.Values {
		if json.Valid([]byte(k)) && containsMetric(k, "cgroup.net.") {
			t.Errorf("host network counted for a container: %s", k)
		}
	}
}

func containsMetric(k, prefix string) bool {
	var l map[string]string
	json.Unmarshal([]byte(k), &l)
	return len(l["metric"]) >= len(prefix) && l["metric"][:len(prefix)] == prefix
}

// The containers of one pod share its sandbox's network namespace: its interfaces are put on
// one of their cgroups only (the first by name), so that a sum over the pod's containers is
// the namespace's own counters, not a multiple of them (as cAdvisor does).
func TestCgroupNetworkPodCountedOnce(t *testing.T) {
	p, root := resTreeRoot(t, true)
	proc, sys := p.opt.Proc, p.opt.Sys
	// Two more containers (web-2, web-3) whose processes share 4242's network namespace, and
	// a fourth (db-1) in a namespace of its own.
	ids := map[string]string{"web-2": "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"web-3": "2123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"db-1":  "3123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	pids := map[string]string{"web-2": "4343", "web-3": "4444", "db-1": "4545"}
	netdev, err := os.ReadFile(filepath.Join(proc, "4242/net/dev"))
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range ids {
		pid := pids[name]
		d := filepath.Join(proc, pid)
		if err := os.CopyFS(d, os.DirFS(filepath.Join(proc, "4242"))); err != nil {
			t.Fatal(err)
		}
		stat, _ := os.ReadFile(filepath.Join(d, "stat"))
		os.WriteFile(filepath.Join(d, "stat"), []byte(pid+string(stat[4:])), 0o644)
		os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/docker/"+id+"\n"), 0o644)
		os.MkdirAll(filepath.Join(sys, "fs/cgroup/unified/docker", id), 0o755)
		os.WriteFile(filepath.Join(sys, "fs/cgroup/unified/docker", id, "memory.current"), []byte("4096\n"), 0o644)
		ns := "net:[4026532999]"
		if name == "db-1" {
			ns = "net:[4026533111]"
		}
		os.Remove(filepath.Join(d, "ns/net"))
		os.Symlink(ns, filepath.Join(d, "ns/net"))
		os.WriteFile(filepath.Join(d, "net/dev"), netdev, 0o644)
		cfg := filepath.Join(root, "var/lib/docker/containers", id, "config.v2.json")
		os.MkdirAll(filepath.Dir(cfg), 0o700)
		if err := os.WriteFile(cfg, []byte(`{"ID":"`+id+`","Name":"/`+name+`","Config":{"Image":"shop:1"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := series.NewRecorder()
	for range 3 {
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	sums := map[string]uint64{} // rx bytes of eth0 by container
	for k, v := range r.Values {
		var l map[string]string
		if json.Unmarshal([]byte(k), &l) == nil && l["metric"] == "cgroup.net.rx.bytes" && l["interface"] == "eth0" {
			sums[l["container"]] += v
		}
	}
	pod := sums["web-1"] + sums["web-2"] + sums["web-3"]
	if pod != 12345 {
		t.Errorf("eth0 rx bytes summed over the pod's containers = %d (%v); want the namespace's 12345", pod, sums)
	}
	if sums["web-1"] != 12345 {
		t.Errorf("the pod's network went to %v; want the first cgroup by name (web-1's)", sums)
	}
	if sums["db-1"] != 12345 {
		t.Errorf("a container in a namespace of its own: %d; want 12345", sums["db-1"])
	}
}
