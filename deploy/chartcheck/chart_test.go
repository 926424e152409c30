package chartcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/cantal"

// objects are the decoded manifests of one rendering, by kind.
type objects struct {
	ds        appsv1.DaemonSet
	svc       corev1.Service
	sa        corev1.ServiceAccount
	cm        corev1.ConfigMap
	secrets   []corev1.Secret
	namespace *corev1.Namespace
}

// decode splits docs into YAML documents and decodes each strictly (an unknown or misplaced
// field is an error) into its kind's API type.
func decode(t *testing.T, docs map[string]string) objects {
	t.Helper()
	var o objects
	seen := map[string]int{}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, doc := range strings.Split(docs[name], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var meta struct{ Kind, APIVersion string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var into any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 DaemonSet":
				into = &o.ds
			case "v1 Service":
				into = &o.svc
			case "v1 ServiceAccount":
				into = &o.sa
			case "v1 ConfigMap":
				into = &o.cm
			case "v1 Secret":
				o.secrets = append(o.secrets, corev1.Secret{})
				into = &o.secrets[len(o.secrets)-1]
			case "v1 Namespace":
				o.namespace = &corev1.Namespace{}
				into = o.namespace
			default:
				t.Fatalf("%s: unexpected %s %s", name, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s: %s does not decode strictly: %v", name, meta.Kind, err)
			}
			seen[meta.Kind]++
		}
	}
	for _, k := range []string{"DaemonSet", "Service", "ServiceAccount", "ConfigMap"} {
		if seen[k] != 1 {
			t.Fatalf("%d %s; want one", seen[k], k)
		}
	}
	return o
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// render renders the chart as `helm template cantal deploy/helm/cantal -n monitoring` would,
// with vals over values.yaml.
func render(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "cantal", Namespace: "monitoring", IsInstall: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for name, s := range out {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(stripComments(s)) != "" {
			docs[name] = s
		}
	}
	return docs
}

// checkReadsHost checks what every form of the DaemonSet must be: the host's namespaces and
// file systems, read-only, and the least privilege.
func checkReadsHost(t *testing.T, o objects, wantCaps []corev1.Capability) {
	t.Helper()
	ds := o.ds
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || !spec.HostNetwork || spec.HostIPC {
		t.Errorf("hostPID %v, hostNetwork %v, hostIPC %v; want the host's PID and network namespaces only", spec.HostPID, spec.HostNetwork, spec.HostIPC)
	}
	if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("dnsPolicy %q: with the host network, the headless Service's name resolves only with ClusterFirstWithHostNet", spec.DNSPolicy)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || o.sa.AutomountServiceAccountToken == nil || *o.sa.AutomountServiceAccountToken {
		t.Error("a service account token is mounted: the agent never calls the Kubernetes API")
	}
	if spec.ServiceAccountName != o.sa.Name {
		t.Errorf("serviceAccountName %q, the chart's %q", spec.ServiceAccountName, o.sa.Name)
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("%d containers, %d init containers; want the agent alone", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	hostPaths := map[string]string{} // volume → host path
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]corev1.VolumeMount{} // host path → mount
	for _, m := range c.VolumeMounts {
		if hp, ok := hostPaths[m.Name]; ok {
			mounted[hp] = m
		}
	}
	for hp, at := range map[string]string{"/proc": "/host/proc", "/sys": "/host/sys", "/": "/host/root"} {
		m, ok := mounted[hp]
		switch {
		case !ok:
			t.Errorf("the host's %s is not mounted", hp)
		case m.MountPath != at || !m.ReadOnly:
			t.Errorf("the host's %s mounted at %s read-only %v; want %s read-only", hp, m.MountPath, m.ReadOnly, at)
		}
	}
	for hp, m := range mounted {
		if !m.ReadOnly && hp != "/var/lib/cantal" {
			t.Errorf("host path %s mounted writable", hp)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("no securityContext with capabilities")
	}
	if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("privileged, or privilege escalation allowed")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the container's file system is writable")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, wantCaps) {
		t.Errorf("capabilities drop %v add %v; want drop ALL, add %v", sc.Capabilities.Drop, sc.Capabilities.Add, wantCaps)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %v; want RuntimeDefault", sc.SeccompProfile)
	}
	if !slices.Contains(c.Args, "--config=/etc/cantal/agent.yml") {
		t.Errorf("args %v do not read /etc/cantal/agent.yml", c.Args)
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "22682" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v", ann)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }) {
		t.Errorf("tolerations %v: want every node", spec.Tolerations)
	}

	// The headless Service selects the pods, and its DNS name is the --peer seed.
	if o.svc.Spec.ClusterIP != corev1.ClusterIPNone || !o.svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service clusterIP %q publishNotReadyAddresses %v; want headless, listing agents not ready yet", o.svc.Spec.ClusterIP, o.svc.Spec.PublishNotReadyAddresses)
	}
	for k, v := range o.svc.Spec.Selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("service selector %s=%s does not select the pods (%v)", k, v, ds.Spec.Template.Labels)
		}
	}
	if ds.Spec.Selector == nil || len(ds.Spec.Selector.MatchLabels) == 0 {
		t.Fatal("no DaemonSet selector")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("DaemonSet selector %s=%s does not select its own pods", k, v)
		}
	}
	cfg := agentConfig(t, o)
	seed := fmt.Sprintf("%s.%s.svc.cluster.local:22682", o.svc.Name, o.svc.Namespace)
	if peers, _ := cfg["peer"].([]any); len(peers) != 1 || peers[0] != seed {
		t.Errorf("agent.yml peer %v; want the headless Service %s", cfg["peer"], seed)
	}
	if cfg["proc"] != "/host/proc" || cfg["sys"] != "/host/sys" {
		t.Errorf("agent.yml proc %v sys %v; want the host's mounts", cfg["proc"], cfg["sys"])
	}
	if p := ports(o.svc); !slices.Equal(p, []string{"TCP/22682", "UDP/22682"}) {
		t.Errorf("service ports %v; want the HTTP and gossip ports", p)
	}
}

func ports(s corev1.Service) []string {
	var out []string
	for _, p := range s.Spec.Ports {
		out = append(out, fmt.Sprintf("%s/%d", p.Protocol, p.Port))
	}
	sort.Strings(out)
	return out
}

func agentConfig(t *testing.T, o objects) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(o.cm.Data["agent.yml"]), &cfg); err != nil {
		t.Fatalf("agent.yml: %v", err)
	}
	return cfg
}

// checkConfig runs the agent's own --check-config on the agent.yml the manifests write.
func checkConfig(t *testing.T, o objects) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "agent.yml")
	if err := os.WriteFile(f, []byte(o.cm.Data["agent.yml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/cantal-agent", "--check-config", f)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("configuration OK")) {
		t.Errorf("cantal-agent --check-config of agent.yml: %v\n%s\n%s", err, out, o.cm.Data["agent.yml"])
	}
}

var allCaps = []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH", "BPF", "PERFMON"}

// TestChartLintsClean: Helm's linter finds nothing above INFO, with the default values and
// with every optional value set.
func TestChartLintsClean(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything": fullValues()} {
		l := lint.All(chartDir, vals, "monitoring", false)
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
}

// TestChartDefaultsReadHostWithLeastPrivilege renders the chart's defaults and checks the
// objects against the API types.
func TestChartDefaultsReadHostWithLeastPrivilege(t *testing.T) {
	o := decode(t, render(t, nil))
	checkReadsHost(t, o, allCaps)
	if len(o.secrets) != 0 {
		t.Errorf("%d secrets without remoteWrite", len(o.secrets))
	}
	res := o.ds.Spec.Template.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "50m" || res.Limits.Memory().String() != "512Mi" {
		t.Errorf("resources %v; want values.yaml's", res)
	}
	checkConfig(t, o)
}

func fullValues() map[string]any {
	return map[string]any{
		"webConfig":  map[string]any{"secretName": "cantal-web"},
		"gossipKey":  map[string]any{"secretName": "cantal-gossip"},
		"writeUsers": []any{"ops"},
		"remoteWrite": []any{map[string]any{"url": "https://mimir.example/api/v1/push",
			"basic_auth": map[string]any{"username": "u", "password_file": "/etc/cantal/rw-password"}}},
		"bpf":         false,
		"resources":   map[string]any{"limits": map[string]any{"memory": "1Gi"}},
		"tolerations": []any{map[string]any{"operator": "Exists"}, map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
		"config":      map[string]any{"interval": "5s"},
	}
}

// TestChartValues: the web config secret, the gossip key, remote_write, bpf off, resources,
// tolerations and free config keys each reach the objects they should.
func TestChartValues(t *testing.T) {
	o := decode(t, render(t, fullValues()))
	checkReadsHost(t, o, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"})
	spec := o.ds.Spec.Template.Spec
	secretAt := map[string]string{} // secret → mount path
	vols := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			vols[v.Name] = v.Secret.SecretName
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
				t.Errorf("secret %s mode %v; want 0400", v.Secret.SecretName, v.Secret.DefaultMode)
			}
		}
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		if s, ok := vols[m.Name]; ok {
			secretAt[s] = m.MountPath
			if !m.ReadOnly {
				t.Errorf("secret %s mounted writable", s)
			}
		}
	}
	if secretAt["cantal-web"] != "/etc/cantal/web" || secretAt["cantal-gossip"] != "/etc/cantal/gossip" || secretAt["cantal-remote-write"] != "/etc/cantal/remote-write" {
		t.Errorf("secrets mounted %v", secretAt)
	}
	cfg := agentConfig(t, o)
	want := map[string]any{"web-config": "/etc/cantal/web/web.yml", "gossip-key": "/etc/cantal/gossip/key",
		"remote-write-config": "/etc/cantal/remote-write/remote-write.yml", "no-bpf": true, "interval": "5s"}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("agent.yml %s = %v; want %v", k, cfg[k], v)
		}
	}
	if len(o.secrets) != 1 || o.secrets[0].Name != "cantal-remote-write" {
		t.Fatalf("secrets %v; want the remote-write one", o.secrets)
	}
	var rw struct {
		RemoteWrite []struct {
			URL       string `json:"url"`
			BasicAuth struct {
				PasswordFile string `json:"password_file"`
			} `json:"basic_auth"`
		} `json:"remote_write"`
	}
	if err := yaml.Unmarshal([]byte(o.secrets[0].StringData["remote-write.yml"]), &rw); err != nil || len(rw.RemoteWrite) != 1 ||
		rw.RemoteWrite[0].URL != "https://mimir.example/api/v1/push" || rw.RemoteWrite[0].BasicAuth.PasswordFile == "" {
		t.Errorf("remote-write.yml %q: %v", o.secrets[0].StringData["remote-write.yml"], err)
	}
	if p := spec.Containers[0].ReadinessProbe; p == nil || p.TCPSocket == nil {
		t.Error("with a web config the probes must not need credentials: want a TCP probe")
	}
	if o.ds.Spec.Template.Annotations["prometheus.io/scheme"] != "https" {
		t.Error("with a web config Prometheus scrapes https")
	}
	if len(spec.Tolerations) != 2 || spec.Containers[0].Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("tolerations %v, resources %v; want the values'", spec.Tolerations, spec.Containers[0].Resources)
	}
	checkConfig(t, o)
}

// TestManifestsReadHostWithLeastPrivilege: deploy/kubernetes/ (kubectl apply -k) decodes
// strictly and makes the same DaemonSet as the chart's defaults, in a namespace that allows it.
func TestManifestsReadHostWithLeastPrivilege(t *testing.T) {
	files, _ := filepath.Glob("../kubernetes/*.yaml")
	docs := map[string]string{}
	var kust struct {
		Resources []string `json:"resources"`
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			if err := yaml.Unmarshal(b, &kust); err != nil {
				t.Fatal(err)
			}
			continue
		}
		docs[filepath.Base(f)] = string(b)
	}
	var listed []string
	for n := range docs {
		listed = append(listed, n)
	}
	sort.Strings(listed)
	sort.Strings(kust.Resources)
	if !slices.Equal(listed, kust.Resources) {
		t.Errorf("kustomization.yaml lists %v; the directory has %v", kust.Resources, listed)
	}
	o := decode(t, docs)
	checkReadsHost(t, o, allCaps)
	if o.namespace == nil || o.namespace.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("no namespace whose pod security admits host namespaces and host paths")
	}
	for _, obj := range []string{o.ds.Namespace, o.svc.Namespace, o.sa.Namespace, o.cm.Namespace} {
		if o.namespace != nil && obj != o.namespace.Name {
			t.Errorf("an object in namespace %q, not %q", obj, o.namespace.Name)
		}
	}
	checkConfig(t, o)
}
