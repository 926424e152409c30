// Package buildinfo says which build of Cantal is running: the version (set at link time by
// the Makefile with -ldflags "-X github.com/cantal-go/cantal/internal/buildinfo.Version=..."),
// the VCS revision the Go toolchain stamped into the binary (runtime/debug.ReadBuildInfo's
// vcs.revision, with "-dirty" when vcs.modified) and the Go version. Both binaries print it
// for --version and the agent exports it as cantal_build_info on /metrics, as Prometheus's own
// build_info gauges.
//
// The only package-level variables are Version and Revision, written by the linker and never
// at run time.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at link time; "0.1.0-dev" for a plain `go build`.
var Version = "0.1.0-dev"

// Revision, when set at link time (the Makefile sets it from git, which also works where the
// toolchain's VCS stamping is off, GOFLAGS=-buildvcs=false), is the VCS commit; otherwise the
// toolchain's vcs.revision is used.
var Revision = ""

// Info is one build's identity.
type Info struct {
	Version   string // Version
	Revision  string // VCS commit, "-dirty" appended for a modified tree; "unknown" when not stamped
	GoVersion string // runtime.Version()
}

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	in := fromBuildInfo(Version, bi)
	if Revision != "" {
		in.Revision = Revision
	}
	return in
}

// fromBuildInfo builds an Info from the linker's version and the toolchain's build info
// (nil when the binary carries none).
func fromBuildInfo(version string, bi *debug.BuildInfo) Info {
	in := Info{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	if bi == nil {
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		if modified {
			rev += "-dirty"
		}
		in.Revision = rev
	}
	return in
}

// String is the --version line: "NAME version V (revision R, GOVERSION)".
func (in Info) String() string {
	return fmt.Sprintf("version %s (revision %s, %s)", in.Version, in.Revision, in.GoVersion)
}
