package agent

import (
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/sysscan"
)

func TestFSExcludeFlags(t *testing.T) {
	c, err := ParseFlags("agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.FSMountsExclude != sysscan.DefaultFSMountPointsExclude || c.FSTypesExclude != sysscan.DefaultFSTypesExclude {
		t.Errorf("defaults %q %q", c.FSMountsExclude, c.FSTypesExclude)
	}
	c, err = ParseFlags("agent", []string{"--fs-mount-points-exclude", "^/srv", "--fs-types-exclude", ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	re, _ := excludeRegexp(c.FSTypesExclude)
	if c.FSMountsExclude != "^/srv" || re.MatchString("proc") || re.MatchString("ext4") {
		t.Errorf("empty --fs-types-exclude should leave nothing out: %q", c.FSTypesExclude)
	}
	if _, err := ParseFlags("agent", []string{"--fs-types-exclude", "(ext4"}, nil); err == nil || !strings.Contains(err.Error(), "--fs-types-exclude") {
		t.Errorf("bad regexp: %v", err)
	}
	_, err = ParseFlags("agent", nil, func(k string) string {
		if k == "CANTAL_FS_MOUNT_POINTS_EXCLUDE" {
			return "[z-a]"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "--fs-mount-points-exclude") {
		t.Errorf("bad regexp from the environment: %v", err)
	}
}
