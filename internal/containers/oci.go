package containers

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OCI runtimes and containerd publish no name for a container's cgroup: the container's
// identity is found by its cgroup path, read from the runtime's state (containerd's task
// bundle config.json, runc's state.json, crun's status), and matched against the cgroup a
// process is in. CgroupName turns both into the agent's cgroup name (procscan's form), so
// they compare equal.

// CgroupName returns the agent's name of a cgroup path, as package procscan makes it: the
// path's components with ".slice", ".scope" and ".service" stripped, joined with dots
// ("/kubepods.slice/kubepods-burstable.slice/x.scope" is "kubepods.kubepods-burstable.x");
// everything under "/user.slice" is "user". The root is "".
func CgroupName(path string) string {
	var b strings.Builder
	for _, c := range strings.Split(path, "/") {
		if c == "" || c == "." || c == ".." {
			continue
		}
		if b.Len() == 0 && c == "user.slice" {
			return "user"
		}
		for _, suf := range []string{".slice", ".scope", ".service"} {
			if strings.HasSuffix(c, suf) && len(c) > len(suf) {
				c = c[:len(c)-len(suf)]
				break
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(c)
	}
	return b.String()
}

// SystemdCgroupPath expands an OCI cgroupsPath in the systemd driver's "slice:prefix:name"
// form to the cgroup path systemd makes of it: "kubepods-burstable-pod1.slice:cri-containerd:ab"
// is "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-ab.scope".
// A path in the cgroupfs form ("/kubepods/burstable/pod1/ab") is returned as it is.
func SystemdCgroupPath(p string) string {
	parts := strings.Split(p, ":")
	if len(parts) != 3 || strings.Contains(p, "/") {
		return p
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	var b strings.Builder
	if slice != "" && slice != "-.slice" {
		base := strings.TrimSuffix(slice, ".slice")
		acc := ""
		for i, w := range strings.Split(base, "-") {
			if i > 0 {
				acc += "-"
			}
			acc += w
			b.WriteString("/" + acc + ".slice")
		}
	}
	switch {
	case strings.HasSuffix(name, ".slice"):
		b.WriteString("/" + name)
	case prefix == "":
		b.WriteString("/" + name + ".scope")
	default:
		b.WriteString("/" + prefix + "-" + name + ".scope")
	}
	return b.String()
}

// Kubernetes' annotations on a container's OCI spec: containerd's CRI plugin writes
// io.kubernetes.cri.*, CRI-O io.kubernetes.pod.*, io.kubernetes.container.name and
// io.kubernetes.cri-o.*.
const (
	annCRIType       = "io.kubernetes.cri.container-type"
	annCRIName       = "io.kubernetes.cri.container-name"
	annCRIPod        = "io.kubernetes.cri.sandbox-name"
	annCRINamespace  = "io.kubernetes.cri.sandbox-namespace"
	annCRIImage      = "io.kubernetes.cri.image-name"
	annPodName       = "io.kubernetes.pod.name"
	annPodNamespace  = "io.kubernetes.pod.namespace"
	annContainerName = "io.kubernetes.container.name"
	annCRIOType      = "io.kubernetes.cri-o.ContainerType"
	annCRIOImage     = "io.kubernetes.cri-o.ImageName"
	annCRIOUserImage = "io.kubernetes.cri-o.Image" // the image the pod asked for
	annCRIOID        = "io.kubernetes.cri-o.ContainerID"
	annManager       = "io.container.manager" // "cri-o" (CRI-O), "libpod" (Podman)
)

// ociIdentity makes the identity of a container from its id, the namespace its runtime keeps
// it in (containerd's, "" for others) and its spec's annotations: a Kubernetes container is
// named by its Kubernetes name, pod and namespace (its pod's sandbox, "POD", as kubelet's
// cAdvisor calls it); any other by its id, in the runtime's namespace.
func ociIdentity(id, ns string, ann map[string]string) Identity {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := ann[k]; v != "" {
				return v
			}
		}
		return ""
	}
	name, image := id, first(annCRIImage, annCRIOImage, annCRIOUserImage)
	pod := first(annCRIPod, annPodName)
	if pod != "" {
		ns = first(annCRINamespace, annPodNamespace)
		name = first(annCRIName, annContainerName)
		if t := first(annCRIType, annCRIOType); t == "sandbox" || name == "" {
			name = "POD"
		}
	}
	short := id
	if isID(id) {
		short = id[:12]
	}
	return Identity{Name: clean(name, maxName), Image: clean(image, maxImage), ID: clean(short, maxName),
		Pod: clean(pod, maxName), Namespace: clean(ns, maxName)}
}

// validOCIID accepts the ids runc and containerd accept: letters, digits, "_+-.", at most 1024
// bytes, not "." or "..".
func validOCIID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 1024 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ParseOCISpec parses an OCI bundle's config.json (containerd's task bundle) of container id
// in containerd namespace ns: the cgroup name its processes are in (see CgroupName; systemd's
// "slice:prefix:name" expanded) and its identity. A spec without a cgroupsPath fails.
func ParseOCISpec(b []byte, ns, id string) (string, Identity, error) {
	var s struct {
		Annotations map[string]string `json:"annotations"`
		Linux       struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", Identity{}, fmt.Errorf("config.json: %w", err)
	}
	if !validOCIID(id) {
		return "", Identity{}, fmt.Errorf("config.json: not a container id")
	}
	cg := CgroupName(SystemdCgroupPath(s.Linux.CgroupsPath))
	if cg == "" {
		return "", Identity{}, fmt.Errorf("config.json: no cgroupsPath")
	}
	return cg, ociIdentity(id, ns, s.Annotations), nil
}

// ParseCRIOConfig parses CRI-O's copy of container id's OCI spec, which it keeps in
// containers/storage (<root>/overlay-containers/<id>/userdata/config.json): the cgroup name
// its processes are in (CRI-O's "crio-<id>" under the pod's cgroup, "<slice>:crio:<id>" under
// the systemd driver) and its identity from CRI-O's annotations (pod, namespace, Kubernetes
// container name, image; its pod's sandbox is "POD"). Podman keeps its containers' specs in the
// same place: a spec CRI-O did not make (io.container.manager other than "cri-o", or no
// io.kubernetes.cri-o.ContainerType) fails, and so does one whose
// io.kubernetes.cri-o.ContainerID is not id.
func ParseCRIOConfig(b []byte, id string) (string, Identity, error) {
	var s struct {
		Annotations map[string]string `json:"annotations"`
		Linux       struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", Identity{}, fmt.Errorf("config.json: %w", err)
	}
	if !validOCIID(id) {
		return "", Identity{}, fmt.Errorf("config.json: not a container id")
	}
	ann := s.Annotations
	if m, ok := ann[annManager]; (ok && m != "cri-o") || ann[annCRIOType] == "" {
		return "", Identity{}, fmt.Errorf("config.json: not a CRI-O container's")
	}
	if cid, ok := ann[annCRIOID]; ok && cid != id {
		return "", Identity{}, fmt.Errorf("config.json: id does not match its directory")
	}
	cg := CgroupName(SystemdCgroupPath(s.Linux.CgroupsPath))
	if cg == "" {
		return "", Identity{}, fmt.Errorf("config.json: no cgroupsPath")
	}
	return cg, ociIdentity(id, "", ann), nil
}

// ParseRuncState parses runc's state.json of container id (under runc's root, <root>/<id>):
// the cgroup name its processes are in and its identity. runc keeps the spec's annotations
// among its config's labels ("key=value", beside "bundle=<dir>"), so a CRI-O or containerd
// container run by runc is named as from its spec.
func ParseRuncState(b []byte, id string) (string, Identity, error) {
	var s struct {
		ID     string `json:"id"`
		Config struct {
			Labels  []string `json:"labels"`
			Cgroups struct {
				Path        string `json:"path"`
				Name        string `json:"name"`
				Parent      string `json:"parent"`
				ScopePrefix string `json:"scope_prefix"`
			} `json:"cgroups"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", Identity{}, fmt.Errorf("state.json: %w", err)
	}
	if s.ID != id || !validOCIID(id) {
		return "", Identity{}, fmt.Errorf("state.json: id does not match its directory")
	}
	c := s.Config.Cgroups
	path := c.Path
	if path == "" && c.Name != "" { // the systemd driver
		path = SystemdCgroupPath(c.Parent + ":" + c.ScopePrefix + ":" + c.Name)
	}
	cg := CgroupName(SystemdCgroupPath(path))
	if cg == "" {
		return "", Identity{}, fmt.Errorf("state.json: no cgroup")
	}
	ann := map[string]string{}
	for _, l := range s.Config.Labels {
		if k, v, ok := strings.Cut(l, "="); ok && k != "bundle" {
			ann[k] = v
		}
	}
	return cg, ociIdentity(id, "", ann), nil
}

// ParseCrunStatus parses crun's status file of container id (<root>/<id>/status): the cgroup
// name and the identity (its id; crun keeps no annotations there).
func ParseCrunStatus(b []byte, id string) (string, Identity, error) {
	var s struct {
		CgroupPath string `json:"cgroup-path"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", Identity{}, fmt.Errorf("status: %w", err)
	}
	if !validOCIID(id) {
		return "", Identity{}, fmt.Errorf("status: not a container id")
	}
	cg := CgroupName(s.CgroupPath)
	if cg == "" {
		return "", Identity{}, fmt.Errorf("status: no cgroup")
	}
	return cg, ociIdentity(id, "", nil), nil
}
