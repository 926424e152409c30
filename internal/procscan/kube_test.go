package procscan

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/series"
)

// kubeCase is one pod's sandbox or container in a fixture tree of Kubernetes' layouts.
type kubeCase struct {
	Driver, QOS, Pod, Namespace, Container, Image string
	CgroupVersion                                 string `json:"cgroup_version"`
	ProcCgroup                                    string `json:"proc_cgroup"`
	CgroupDir                                     string `json:"cgroup_dir"`
	ContainerID                                   string `json:"container_id"`
}

// Kubernetes' layouts, from fixtures of real kubelet trees under the cgroupfs and the systemd
// driver: containerd's CRI task bundles with their annotations (../containers/testdata/kube:
// cases.json, each Guaranteed, Burstable and BestEffort pod's sandbox and container as
// /proc/PID/cgroup shows them on a cgroup v1 (hybrid) and a v2 machine) and CRI-O's own state
// (../containers/testdata/kube-crio, each case on v1 and v2 alike): a process in any of them,
// and its cgroup, are labelled with its pod, namespace and Kubernetes container name.
func TestKubernetesLayouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	read := func(tree string) []kubeCase {
		b, err := os.ReadFile("../containers/testdata/" + tree + "/cases.json")
		if err != nil {
			t.Fatal(err)
		}
		var cases []kubeCase
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatal(err)
		}
		return cases
	}
	if cases := read("kube"); len(cases) != 24 {
		t.Fatalf("containerd: %d cases; want 2 drivers × 3 QoS classes × sandbox and container × v1 and v2", len(cases))
	} else {
		kubeLayouts(t, "kube", cases)
	}
	var crio []kubeCase
	for _, c := range read("kube-crio") {
		// CRI-O's cases name the cgroup alone: as /proc/PID/cgroup shows it on each version.
		c.CgroupVersion, c.ProcCgroup = "v1", "11:memory:"+c.CgroupDir+"\n4:cpu,cpuacct:"+c.CgroupDir+"\n1:name=systemd:"+c.CgroupDir+"\n0::/\n"
		crio = append(crio, c)
		c.CgroupVersion, c.ProcCgroup = "v2", "0::"+c.CgroupDir+"\n"
		crio = append(crio, c)
	}
	if len(crio) != 24 {
		t.Fatalf("CRI-O: %d cases; want 2 drivers × 3 QoS classes × sandbox and container × v1 and v2", len(crio))
	}
	kubeLayouts(t, "kube-crio", crio)
}

// kubeLayouts runs each case of a fixture tree (../containers/testdata/TREE) through the
// process scan: see TestKubernetesLayouts.
func kubeLayouts(t *testing.T, tree string, cases []kubeCase) {
	for _, c := range cases {
		t.Run(tree+"/"+c.Driver+"/"+c.QOS+"/"+c.CgroupVersion+"/"+c.Container, func(t *testing.T) {
			proc, sys := copyTree(t, "testdata/proc"), copyTree(t, "testdata/sys")
			if err := os.WriteFile(filepath.Join(proc, "4242/cgroup"), []byte(c.ProcCgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			file, hier := "memory.usage_in_bytes", "memory"
			if c.CgroupVersion == "v2" {
				file, hier = "memory.current", "unified"
			}
			dir := filepath.Join(sys, "fs/cgroup", hier, c.CgroupDir)
			os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, file), []byte("1048576\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			os.Chmod(root, 0o755)
			if err := os.CopyFS(root, os.DirFS(filepath.Join("../containers/testdata", tree, c.Driver))); err != nil {
				t.Fatal(err)
			}
			p := NewProcesses(Options{Proc: proc, Sys: sys, PageSize: 4096, Containers: containers.New(containers.Options{Root: root})})
			r := series.NewRecorder()
			for range 2 {
				if err := p.Collect(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			want := series.Labels{"metric": "cgroup.memory.usage", "container": c.Container, "pod": c.Pod,
				"namespace": c.Namespace, "container_id": c.ContainerID, "cgroup": containers.CgroupName(c.CgroupDir)}
			if c.Image != "" {
				want["image"] = c.Image
			}
			k, _ := json.Marshal(want)
			if _, ok := r.Values[string(k)]; !ok {
				t.Errorf("no series %s among %v", k, cgroupKeys(r.Values))
			}
			want["metric"], want["pid"], want["process"] = "process.memory.rss", "4242", "sleep"
			k, _ = json.Marshal(want)
			if _, ok := r.Values[string(k)]; !ok {
				t.Errorf("no series %s", k)
			}
		})
	}
}

// cgroupKeys are the keys of the cgroup.memory.usage series among m's.
func cgroupKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		if strings.Contains(k, `"cgroup.memory.usage"`) {
			out = append(out, k)
		}
	}
	return out
}
