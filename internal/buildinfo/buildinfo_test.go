package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo("1.2.3", bi)
	if got != (Info{Version: "1.2.3", Revision: "abc123-dirty", GoVersion: "go1.99"}) {
		t.Errorf("fromBuildInfo = %+v", got)
	}
	bi.Settings[2].Value = "false"
	if got := fromBuildInfo("1.2.3", bi); got.Revision != "abc123" {
		t.Errorf("clean tree: revision %q, want abc123", got.Revision)
	}
	got = fromBuildInfo("v", nil)
	if got.Revision != "unknown" || got.GoVersion != runtime.Version() {
		t.Errorf("no build info: %+v", got)
	}
	if s := got.String(); !strings.Contains(s, "version v") || !strings.Contains(s, "revision unknown") {
		t.Errorf("String() = %q", s)
	}
}
