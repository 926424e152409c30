// Package build makes the cantal packages from binaries already built (the Makefile builds them
// static, CGO_ENABLED=0, per architecture): the .deb and .rpm (nfpm, as a library) and the
// OCI image of the agent (go-containerregistry, no container daemon). It lives in its own
// module, packaging/, because nfpm brings go-git, openpgp and friends that the agent must not
// link or vendor.
//
// The generated contents (man pages, shell completion) come from internal/manpage, which reads
// the programs' own flag sets. Functions are safe for concurrent use on distinct directories.
package build

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/internal/manpage"
	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Options are one `make package` run.
type Options struct {
	Version string    // package version, e.g. 1.2.3 or 0.0.0~git20261127151000.8749b46
	Date    time.Time // the files' modification time and the changelog's date (the commit's)
	Root    string    // the packaging directory (files/, scripts/)
	Bins    string    // holds ARCH/cantal-agent and ARCH/cantal for each arch
	Out     string    // where the packages are written
	Arches  []string  // Go architectures: amd64, arm64
}

// maintainer is the packages' Maintainer (a mail host lintian accepts).
const maintainer = "Cantal in Go maintainers <cantal-go@users.noreply.github.com>"

// rpmArch is the rpm name of a Go architecture.
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// DebName and RPMName are the file names make package writes.
func DebName(version, arch string) string { return fmt.Sprintf("cantal_%s_%s.deb", version, arch) }

// RPMName is cantal-VERSION.ARCH.rpm with rpm's name of the architecture (x86_64, aarch64).
func RPMName(version, arch string) string {
	return fmt.Sprintf("cantal-%s.%s.rpm", version, rpmArch[arch])
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // no name, no time: reproducible
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// Stage writes the generated contents into dir: the man pages (gzipped), the completions and
// the Debian changelog.
func Stage(dir, version string, date time.Time) error {
	page := manpage.Page{Version: version, Date: date.UTC().Format("2006-01-02")}
	changelog := fmt.Sprintf("cantal (%s) unstable; urgency=medium\n\n  * Built from the cantal source tree (make package).\n\n -- %s  %s\n",
		version, maintainer, date.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	for name, data := range map[string][]byte{
		"cantal-agent.8.gz": gz(manpage.Agent(page)),
		"cantal.1.gz":       gz(manpage.CLI(page)),
		"cantal.bash":       manpage.Bash(),
		"_cantal":           manpage.Zsh(),
		"changelog.gz":      gz([]byte(changelog)),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
	}
	return nil
}

// config is the nfpm description of the cantal package for one architecture.
func config(o Options, stage, arch string) *nfpm.Config {
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode, MTime: o.Date}}
	}
	only := func(c *files.Content, packager string) *files.Content { c.Packager = packager; return c }
	bins := filepath.Join(o.Bins, arch)
	fs := filepath.Join(o.Root, "files")
	contents := files.Contents{
		file(filepath.Join(bins, "cantal-agent"), "/usr/bin/cantal-agent", 0o755),
		file(filepath.Join(bins, "cantal"), "/usr/bin/cantal", 0o755),
		file(filepath.Join(stage, "cantal-agent.8.gz"), "/usr/share/man/man8/cantal-agent.8.gz", 0o644),
		file(filepath.Join(stage, "cantal.1.gz"), "/usr/share/man/man1/cantal.1.gz", 0o644),
		file(filepath.Join(stage, "cantal.bash"), "/usr/share/bash-completion/completions/cantal", 0o644),
		only(file(filepath.Join(stage, "_cantal"), "/usr/share/zsh/vendor-completions/_cantal", 0o644), "deb"),
		only(file(filepath.Join(stage, "_cantal"), "/usr/share/zsh/site-functions/_cantal", 0o644), "rpm"),
		only(file(filepath.Join(fs, "cantal-agent.service"), "/lib/systemd/system/cantal-agent.service", 0o644), "deb"),
		only(file(filepath.Join(fs, "cantal-agent.service"), "/usr/lib/systemd/system/cantal-agent.service", 0o644), "rpm"),
		only(file(filepath.Join(fs, "copyright"), "/usr/share/doc/cantal/copyright", 0o644), "deb"),
		// Go binaries are static by design (CGO_ENABLED=0); lintian exempts them only when
		// built from a Debian source package with golang-go, which this is not.
		only(file(filepath.Join(fs, "lintian-overrides"), "/usr/share/lintian/overrides/cantal", 0o644), "deb"),
		only(file(filepath.Join(stage, "changelog.gz"), "/usr/share/doc/cantal/changelog.gz", 0o644), "deb"),
	}
	conf := file(filepath.Join(fs, "agent.yml"), "/etc/cantal/agent.yml", 0o644)
	conf.Type = files.TypeConfigNoReplace // a conffile in the .deb, %config(noreplace) in the .rpm
	contents = append(contents, conf)
	scripts := filepath.Join(o.Root, "scripts")
	return &nfpm.Config{
		Info: nfpm.Info{
			Name:          "cantal",
			Arch:          arch,
			Platform:      "linux",
			Version:       o.Version,
			VersionSchema: "none",
			Section:       "admin",
			Priority:      "optional",
			Maintainer:    maintainer,
			Description: "cluster monitoring agent and command-line tool\n" +
				"cantal-agent scans the machine and every instrumented application every\n" +
				"two seconds, keeps an hour of every series at full precision across\n" +
				"restarts, and serves a JSON API, a live web UI, and Prometheus and Influx\n" +
				"exports. Agents of a cluster gossip and answer for the whole fleet. The\n" +
				"cantal command queries them.",
			Vendor:   "Cantal in Go",
			Homepage: "https://github.com/cantal-go/cantal",
			License:  "unspecified",
			MTime:    o.Date,
			Overridables: nfpm.Overridables{
				Contents: contents,
				Umask:    0o022,
			},
		},
		Overrides: map[string]*nfpm.Overridables{
			"deb": {
				Scripts: nfpm.Scripts{
					PostInstall: filepath.Join(scripts, "deb", "postinst"),
					PreRemove:   filepath.Join(scripts, "deb", "prerm"),
					PostRemove:  filepath.Join(scripts, "deb", "postrm"),
				},
			},
			"rpm": {
				Scripts: nfpm.Scripts{
					PostInstall: filepath.Join(scripts, "rpm", "post"),
					PreRemove:   filepath.Join(scripts, "rpm", "preun"),
					PostRemove:  filepath.Join(scripts, "rpm", "postun"),
				},
				RPM: nfpm.RPM{
					Arch:    rpmArch[arch],
					Summary: "cluster monitoring agent and command-line tool",
					Group:   "System Environment/Daemons",
				},
			},
		},
	}
}

// Packages writes the .deb and the .rpm of every architecture into o.Out and returns their
// paths.
func Packages(o Options) ([]string, error) {
	if o.Version == "" || len(o.Arches) == 0 {
		return nil, fmt.Errorf("package: want a version and at least one architecture")
	}
	stage, err := os.MkdirTemp("", "cantal-stage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if err := Stage(stage, o.Version, o.Date); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, arch := range o.Arches {
		if rpmArch[arch] == "" {
			return nil, fmt.Errorf("package: architecture %q: want amd64 or arm64", arch)
		}
		cfg := config(o, stage, arch)
		for _, format := range []string{"deb", "rpm"} {
			name := DebName(o.Version, arch)
			if format == "rpm" {
				name = RPMName(o.Version, arch)
			}
			path := filepath.Join(o.Out, name)
			if err := pack(cfg, format, path); err != nil {
				return nil, fmt.Errorf("package %s: %w", name, err)
			}
			out = append(out, path)
		}
	}
	return out, nil
}

func pack(cfg *nfpm.Config, format, path string) error {
	info, err := cfg.Get(format)
	if err != nil {
		return err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return err
	}
	p, err := nfpm.Get(format)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := p.Package(info, f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
