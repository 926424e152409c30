package build

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestLintianFindsNoErrors runs Debian's lintian on the .deb: no E: line.
func TestLintianFindsNoErrors(t *testing.T) {
	lintian := need(t, "lintian")
	deb := packages(t, "1.0.0")
	out := run(t, lintian, "--tag-display-limit", "0", "--allow-root", deb)
	var errs, warns []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "E: "):
			errs = append(errs, l)
		case strings.HasPrefix(l, "W: "):
			warns = append(warns, l)
		}
	}
	t.Logf("lintian: %d errors, %d warnings\n%s", len(errs), len(warns), out)
	if len(errs) > 0 {
		t.Fatalf("lintian errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestDebContents: dpkg-deb lists the binaries, man pages, completions, the unit and the
// conffile, and the binaries are static.
func TestDebContents(t *testing.T) {
	deb := packages(t, "1.0.0")
	list := run(t, need(t, "dpkg-deb"), "--contents", deb)
	for _, f := range []string{"./usr/bin/cantal-agent", "./usr/bin/cantal", "./usr/share/man/man8/cantal-agent.8.gz",
		"./usr/share/man/man1/cantal.1.gz", "./usr/share/bash-completion/completions/cantal",
		"./usr/share/zsh/vendor-completions/_cantal", "./lib/systemd/system/cantal-agent.service",
		"./etc/cantal/agent.yml", "./usr/share/doc/cantal/copyright"} {
		if !strings.Contains(list, " "+f+"\n") {
			t.Errorf("the .deb lacks %s:\n%s", f, list)
		}
	}
	conffiles := run(t, "dpkg-deb", "--info", deb, "conffiles")
	if strings.TrimSpace(conffiles) != "/etc/cantal/agent.yml" {
		t.Errorf("conffiles = %q", conffiles)
	}
	for _, b := range []string{"cantal-agent", "cantal"} {
		out := run(t, need(t, "file"), filepath.Join(bins(t), runtime.GOARCH, b))
		if !strings.Contains(out, "statically linked") {
			t.Errorf("%s is not static: %s", b, out)
		}
	}
}

// TestRPMQuery: rpm reads the .rpm's header and file list.
func TestRPMQuery(t *testing.T) {
	rpm := need(t, "rpm")
	deb := packages(t, "1.0.0")
	path := filepath.Join(filepath.Dir(deb), RPMName("1.0.0", runtime.GOARCH))
	info := run(t, rpm, "-qip", path)
	for _, want := range []string{"Name        : cantal", "Version     : 1.0.0", "Architecture: " + rpmArch[runtime.GOARCH]} {
		if !strings.Contains(info, want) {
			t.Errorf("rpm -qip lacks %q:\n%s", want, info)
		}
	}
	files := strings.Fields(run(t, rpm, "-qlp", path))
	for _, f := range []string{"/usr/bin/cantal-agent", "/usr/bin/cantal", "/usr/share/man/man8/cantal-agent.8.gz",
		"/usr/share/man/man1/cantal.1.gz", "/usr/share/bash-completion/completions/cantal",
		"/usr/share/zsh/site-functions/_cantal", "/usr/lib/systemd/system/cantal-agent.service", "/etc/cantal/agent.yml"} {
		if !slices.Contains(files, f) {
			t.Errorf("rpm -qlp lacks %s: %v", f, files)
		}
	}
	if cf := strings.TrimSpace(run(t, rpm, "-qcp", path)); cf != "/etc/cantal/agent.yml" {
		t.Errorf("rpm -qcp = %q", cf)
	}
	scripts := run(t, rpm, "-qp", "--scripts", path)
	for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "try-restart cantal-agent.service"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("rpm --scripts lacks %q:\n%s", want, scripts)
		}
	}
}

// TestPackagedConfigIsAccepted: the agent.yml the packages install passes --check-config, and
// every key in it (and in its commented examples) is a flag.
func TestPackagedConfigIsAccepted(t *testing.T) {
	agent := agentBinary(t)
	run(t, agent, "--check-config", filepath.Join("..", "files", "agent.yml"))
	// The commented examples too, uncommented (paths that exist stand in for the files).
	data, err := os.ReadFile(filepath.Join("..", "files", "agent.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	example := regexp.MustCompile(`^# ?([a-z][a-z0-9-]*): (\S.*)$`)
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		m := example.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(m[2], "/etc/cantal/") { // a file the operator writes
			continue
		}
		b.WriteString(m[1] + ": " + m[2] + "\n")
		n++
	}
	if n == 0 {
		t.Fatal("no commented example found")
	}
	f := filepath.Join(t.TempDir(), "agent.yml")
	os.WriteFile(f, []byte(b.String()), 0o600)
	run(t, agent, "--check-config", f)
}
