// Package cantal_test checks the repository's module layout: the client libraries (shm,
// metrics, influx, rrdd) are modules of their own, so an application importing one builds
// nothing of the agent (Prometheus, memberlist, ...). See README "Layout".
package cantal_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clientModules lists each client module's directory, its module path (the import path
// applications use, kept from when the libraries were part of the agent's module), and, per
// package pattern of the module, the modules outside the standard library and the client
// modules themselves that its packages (not its tests) may pull in.
var clientModules = []struct {
	dir, path string
	allowed   map[string][]string // package pattern → third-party modules allowed
}{
	{"internal/jsonstr", "github.com/cantal-go/cantal/internal/jsonstr", map[string][]string{
		".": nil,
	}},
	{"shm", "github.com/cantal-go/cantal/shm", map[string][]string{
		"./...": {"golang.org/x/sys"},
	}},
	{"metrics", "github.com/cantal-go/cantal/metrics", map[string][]string{
		"./...": {"golang.org/x/sys"}, // shm's
	}},
	{"rrdd", "github.com/cantal-go/cantal/rrdd", map[string][]string{
		"./...": nil,
	}},
	{"influx", "github.com/cantal-go/cantal/influx", map[string][]string{
		".": {"github.com/influxdata/line-protocol/v2"},
		// The ECS compatibility API speaks gRPC: grpc and what grpc itself needs.
		"./ecs/...": {"github.com/influxdata/line-protocol/v2", "google.golang.org/grpc",
			"google.golang.org/protobuf", "google.golang.org/genproto/googleapis/rpc",
			"golang.org/x/net", "golang.org/x/text", "golang.org/x/sys"},
	}},
}

// TestClientModulesPullOnlyTheirOwnDependencies runs `go list -deps` in each client module and
// fails when a package it builds comes from a module outside the standard library, the client
// modules and the module's allowed list: the agent's module (github.com/cantal-go/cantal) or
// any of its dependencies.
func TestClientModulesPullOnlyTheirOwnDependencies(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the modules' dependencies: %v", err)
	}
	var own []string
	for _, m := range clientModules {
		own = append(own, m.path)
	}
	for _, m := range clientModules {
		t.Run(m.dir, func(t *testing.T) {
			out, err := exec.Command(goCmd, "list", "-C", filepath.FromSlash(m.dir), "-m").CombinedOutput()
			if err != nil {
				t.Fatalf("go list -m in %s: %v\n%s", m.dir, err, out)
			}
			if got := strings.TrimSpace(string(out)); got != m.path {
				t.Fatalf("%s is in module %q; want a module of its own, %q", m.dir, got, m.path)
			}
			for pattern, allowed := range m.allowed {
				out, err := exec.Command(goCmd, "list", "-C", filepath.FromSlash(m.dir), "-deps", "-f",
					`{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}`, pattern).CombinedOutput()
				if err != nil {
					t.Fatalf("go list -deps %s in %s: %v\n%s", pattern, m.dir, err, out)
				}
				for line := range strings.Lines(string(out)) {
					pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
					if pkg == "" {
						continue
					}
					if !slices.Contains(own, mod) && !slices.Contains(allowed, mod) {
						t.Errorf("%s (%s) pulls %s from module %q: not the standard library, a client module or one of %q",
							m.path, pattern, pkg, mod, allowed)
					}
				}
			}
		})
	}
}
