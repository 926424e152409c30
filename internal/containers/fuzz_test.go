package containers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for every parser of runtime state; run e.g.
//
//	go test -run '^$' -fuzz '^FuzzParsePodmanContainers$' -fuzztime 1m ./internal/containers

func checkIdentity(t *testing.T, id Identity) {
	if !utf8.ValidString(id.Name) || !utf8.ValidString(id.Image) || len(id.Name) > maxName || len(id.Image) > maxImage || id.ID == "" || len(id.ID) > maxName ||
		!utf8.ValidString(id.Pod+id.Namespace) || len(id.Pod) > maxName || len(id.Namespace) > maxName {
		t.Errorf("identity not a clean label set: %+v", id)
	}
	if strings.ContainsAny(id.Name+id.Image+id.Pod+id.Namespace, "\x00\n\r") {
		t.Errorf("control characters kept: %+v", id)
	}
}

func FuzzParsePodmanContainers(f *testing.F) {
	f.Add(readFixture(f, "podman-containers.json"))
	f.Add([]byte(`[{"id":"` + probeID + `","names":["a\u0000b"]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParsePodmanContainers(b)
		if err != nil {
			return
		}
		for id, ident := range m {
			if !isID(id) || ident.ID != id[:12] {
				t.Errorf("id %q → %+v", id, ident)
			}
			checkIdentity(t, ident)
		}
	})
}

func FuzzParseDockerConfig(f *testing.F) {
	f.Add(readFixture(f, "docker-config.v2.json"))
	f.Add([]byte(`{"ID":"` + dockID + `","Name":"/\u202e"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ident, err := ParseDockerConfig(b, dockID)
		if err == nil {
			checkIdentity(t, ident)
		}
	})
}

func FuzzFromCgroup(f *testing.F) {
	f.Add("libpod_parent.libpod-" + probeID)
	f.Add("/system.slice/docker-" + dockID + ".scope")
	f.Fuzz(func(t *testing.T, s string) {
		rt, id := FromCgroup(s)
		if (rt == NoRuntime) != (id == "") || (id != "" && (!isID(id) || !strings.Contains(s, id))) {
			t.Errorf("FromCgroup(%q) = %v, %q", s, rt, id)
		}
	})
}

// checkOCI checks a parsed OCI state: a cgroup name that is no root, the users' or a path, and
// a clean identity.
func checkOCI(t *testing.T, cg string, id Identity) {
	if cg == "" || strings.Contains(cg, "/") {
		t.Errorf("cgroup name %q", cg)
	}
	checkIdentity(t, id)
}

func FuzzParseOCISpec(f *testing.F) {
	f.Add(readFixture(f, "kube/systemd/run/containerd/io.containerd.runtime.v2.task/k8s.io/"+strings.Repeat("4d", 32)+"/config.json"), "k8s.io", strings.Repeat("4d", 32))
	f.Add([]byte(`{"linux":{"cgroupsPath":"/default/web-1"}}`), "default", "web-1")
	f.Add([]byte(`{"annotations":{"io.kubernetes.cri.sandbox-name":"\u202e"},"linux":{"cgroupsPath":"a.slice:b:c"}}`), "k8s.io", "c")
	f.Fuzz(func(t *testing.T, b []byte, ns, id string) {
		if cg, ident, err := ParseOCISpec(b, ns, id); err == nil {
			checkOCI(t, cg, ident)
		}
	})
}

func FuzzParseRuncState(f *testing.F) {
	f.Add([]byte(`{"id":"c1","config":{"labels":["bundle=/b","io.kubernetes.pod.name=p"],"cgroups":{"name":"c1","parent":"a-b.slice","scope_prefix":"crio"}}}`), "c1")
	f.Add([]byte(`{"id":"c2","config":{"cgroups":{"path":"/x/c2"}}}`), "c2")
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		if cg, ident, err := ParseRuncState(b, id); err == nil {
			checkOCI(t, cg, ident)
		}
		if cg, ident, err := ParseCrunStatus(b, id); err == nil {
			checkOCI(t, cg, ident)
		}
	})
}

func FuzzSystemdCgroupPath(f *testing.F) {
	f.Add("kubepods-burstable-pod1.slice:cri-containerd:ab")
	f.Add("/default/x")
	f.Fuzz(func(t *testing.T, s string) {
		p := SystemdCgroupPath(s)
		if n := CgroupName(p); strings.Contains(n, "/") {
			t.Errorf("CgroupName(SystemdCgroupPath(%q)) = %q", s, n)
		}
	})
}

func FuzzParseCRIOConfig(f *testing.F) {
	for _, c := range crioCases(f) {
		full := strings.TrimPrefix(strings.TrimSuffix(c.CgroupDir[strings.LastIndexByte(c.CgroupDir, '/')+1:], ".scope"), "crio-")
		f.Add(readFixture(f, "kube-crio/"+c.Driver+"/var/lib/containers/storage/overlay-containers/"+full+"/userdata/config.json"), full)
	}
	f.Add([]byte(`{"annotations":{"io.kubernetes.cri-o.ContainerType":"container","io.kubernetes.pod.name":"a\u0000b"},"linux":{"cgroupsPath":"s.slice:crio:x"}}`), "x")
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		cg, ident, err := ParseCRIOConfig(b, id)
		if err != nil {
			return
		}
		if cg == "" || !validOCIID(id) {
			t.Errorf("ParseCRIOConfig(_, %q) = %q, %+v", id, cg, ident)
		}
		checkIdentity(t, ident)
	})
}
