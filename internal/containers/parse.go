package containers

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Identity is what the labels of a container's series say of it.
type Identity struct {
	Name  string // the runtime's name for it, e.g. "web-1"
	Image string // the image it was made from, as the runtime names it, e.g. "localhost/shop:1"
	ID    string // the first 12 hex digits of its id (an OCI id that is no 64 hex digits: all of it)
	// Pod and Namespace name a Kubernetes container's pod and namespace (from the CRI
	// annotations on its spec; Name is then its Kubernetes container name); Namespace is a
	// plain containerd container's containerd namespace. Empty for other runtimes.
	Pod       string
	Namespace string
}

// Label length caps: a name beyond them is cut (at a rune boundary).
const (
	maxName  = 128
	maxImage = 256
)

// Runtime is a container runtime whose cgroups the package recognises.
type Runtime int

// The runtimes, in the order of the cgroup prefixes they use.
const (
	NoRuntime Runtime = iota
	Podman
	Docker
	Containerd // containerd's task bundles, including Kubernetes pods made through CRI
	OCI        // a plain OCI runtime's state (runc, crun)
	CRIO       // CRI-O's per-container config in containers/storage
)

func (r Runtime) String() string {
	switch r {
	case Podman:
		return "podman"
	case Docker:
		return "docker"
	case Containerd:
		return "containerd"
	case OCI:
		return "oci"
	case CRIO:
		return "cri-o"
	}
	return "none"
}

// FromCgroup returns the runtime and full (64 hex) container id a cgroup name (procscan's
// dotted form, e.g. "libpod_parent.libpod-<id>", "docker.<id>", "system.docker-<id>") or path
// ("/docker/<id>", "/system.slice/docker-<id>.scope") belongs to, or NoRuntime. Podman's conmon
// cgroup ("libpod-conmon-<id>") is not the container's. The outermost container wins: a
// container that makes a cgroup inside its own, named like another container's
// (".../libpod-<A>/libpod-<B>"), is still A.
func FromCgroup(cgroup string) (Runtime, string) {
	prev, rest := "", cgroup
	for rest != "" {
		c := rest
		if i := strings.IndexAny(rest, "./"); i >= 0 {
			c, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		switch {
		case strings.HasPrefix(c, "libpod-") && isID(c[len("libpod-"):]):
			return Podman, c[len("libpod-"):]
		case strings.HasPrefix(c, "docker-") && isID(c[len("docker-"):]):
			return Docker, c[len("docker-"):]
		case prev == "docker" && isID(c):
			return Docker, c
		}
		if c != "" {
			prev = c
		}
	}
	return NoRuntime, ""
}

func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clean makes a runtime-given string a label value: valid UTF-8, control and format characters
// replaced by '?', at most max bytes.
func clean(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func identity(name, image, id string) Identity {
	return Identity{Name: clean(name, maxName), Image: clean(image, maxImage), ID: id[:12]}
}

// ParsePodmanContainers parses containers/storage's containers.json into the identities of the
// containers it lists, by full id. Entries without a valid id are skipped; a container without
// a name is named by its short id.
func ParsePodmanContainers(b []byte) (map[string]Identity, error) {
	var list []struct {
		ID       string   `json:"id"`
		Names    []string `json:"names"`
		Image    string   `json:"image"`
		Metadata string   `json:"metadata"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("containers.json: %w", err)
	}
	out := make(map[string]Identity, len(list))
	for _, c := range list {
		if !isID(c.ID) {
			continue
		}
		var md struct {
			ImageName string `json:"image-name"`
			Name      string `json:"name"`
		}
		if c.Metadata != "" {
			json.Unmarshal([]byte(c.Metadata), &md) // libpod's; another tool's may differ
		}
		name := md.Name
		if name == "" && len(c.Names) > 0 {
			name = c.Names[0]
		}
		if name == "" {
			name = c.ID[:12]
		}
		image := md.ImageName
		if image == "" && len(c.Image) >= 12 {
			image = c.Image[:12]
		}
		out[c.ID] = identity(name, image, c.ID)
	}
	return out, nil
}

// ParseDockerConfig parses dockerd's containers/<id>/config.v2.json. It fails when the file's
// ID is not the id it was read for (a file copied under another container's directory).
func ParseDockerConfig(b []byte, id string) (Identity, error) {
	var c struct {
		ID     string `json:"ID"`
		Name   string `json:"Name"`
		Image  string `json:"Image"`
		Config struct {
			Image string `json:"Image"`
		} `json:"Config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Identity{}, fmt.Errorf("config.v2.json: %w", err)
	}
	if !isID(id) || c.ID != id {
		return Identity{}, fmt.Errorf("config.v2.json: id does not match its directory")
	}
	name := strings.TrimPrefix(c.Name, "/")
	if name == "" {
		name = id[:12]
	}
	image := c.Config.Image
	if image == "" {
		image = strings.TrimPrefix(c.Image, "sha256:")
	}
	return identity(name, image, id), nil
}
