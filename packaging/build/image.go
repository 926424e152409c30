package build

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ImageOptions are one `make image` run.
type ImageOptions struct {
	Version string    // image version; the tag is it with characters tags refuse as '-'
	Date    time.Time // the image's creation time and its files' (the commit's)
	Agent   string    // the static cantal-agent binary
	Arch    string    // its Go architecture
	Out     string    // where the archive is written
}

// ImageName is the archive's file name.
func ImageName(version string) string { return "cantal-agent-" + version + ".oci.tar" }

var tagBad = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag is the name the archive gives the image: cantal-agent:VERSION (podman adds localhost/).
func Tag(version string) string { return "cantal-agent:" + tagBad.ReplaceAllString(version, "-") }

// ImageArgs is the command the image runs by default: the host's /proc and /sys where the
// documented run mounts them (README, Install: / at /host, read-only). The agent reads
// os-release beside --proc (/host/etc) and the mounts through /host/proc/1/root.
var ImageArgs = []string{"--proc", "/host/proc", "--sys", "/host/sys"}

// layerTar is the image's one layer: the agent binary and the empty state directory.
func layerTar(agent []byte, date time.Time) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dir := func(name string, mode int64) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: date})
	}
	dir("usr/", 0o755)
	dir("usr/bin/", 0o755)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/cantal-agent", Mode: 0o755, Size: int64(len(agent)), ModTime: date})
	tw.Write(agent)
	dir("var/", 0o755)
	dir("var/lib/", 0o755)
	dir("var/lib/cantal/", 0o700)
	dir("tmp/", 0o1777)
	tw.Close()
	return b.Bytes()
}

// Image writes the agent's image as a tar archive holding both an OCI image layout
// (index.json, oci-layout, blobs/) and docker's manifest.json over the same blobs, so that
// `podman load` and `docker load` (any version) take it. It returns the archive's path.
func Image(o ImageOptions) (string, error) {
	agent, err := os.ReadFile(o.Agent)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	data := layerTar(agent, o.Date)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", fmt.Errorf("image: layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Date}
	cf.Config = v1.Config{
		Entrypoint:   []string{"/usr/bin/cantal-agent"},
		Cmd:          ImageArgs,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/bin"},
		ExposedPorts: map[string]struct{}{"22682/tcp": {}, "22682/udp": {}},
		Volumes:      map[string]struct{}{"/var/lib/cantal": {}},
		StopSignal:   "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "cantal-agent",
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.description": "Cantal cluster monitoring agent; run with the host's PID and network namespaces and its /proc, /sys and / mounted read-only",
			"org.opencontainers.image.source":      "https://github.com/cantal-go/cantal",
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", fmt.Errorf("image: config: %w", err)
	}

	dir, err := os.MkdirTemp("", "cantal-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("image: layout: %w", err)
	}
	tag := Tag(o.Version)
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tagBad.ReplaceAllString(o.Version, "-"),
		"io.containerd.image.name":          "docker.io/library/" + tag,
	})); err != nil {
		return "", fmt.Errorf("image: layout: %w", err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	ld, err := layer.Digest()
	if err != nil {
		return "", err
	}
	manifest, _ := json.Marshal([]map[string]any{{
		"Config":   "blobs/sha256/" + cfgName.Hex,
		"RepoTags": []string{tag},
		"Layers":   []string{"blobs/sha256/" + ld.Hex},
	}})
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, ImageName(o.Version))
	if err := tarDir(dir, path+".tmp", o.Date); err != nil {
		os.Remove(path + ".tmp")
		return "", fmt.Errorf("image: %w", err)
	}
	return path, os.Rename(path+".tmp", path)
}

// tarDir writes the files under dir into a tar archive at path, names relative to dir.
func tarDir(dir, path string, date time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: date})
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: date}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
