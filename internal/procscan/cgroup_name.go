package procscan

import (
	"bytes"
	"strings"

	"github.com/cantal-go/cantal/internal/kfile"
)

// A process's cgroup
//
// /proc/PID/cgroup has one line per hierarchy: cgroup v1 controllers ("4:memory:/docker/ab12"),
// the v1 "name=systemd" hierarchy, and on v2 and hybrid machines the unified line ("0::/path").
// These may disagree: on a hybrid machine a container runtime may put a process in a v1 memory
// cgroup while systemd's trees (name=systemd and the unified one) still say "/".
//
// The cgroup of a process is the first of these paths that is not the root "/", in this order:
//
//  1. the unified (v2) hierarchy, "0::" — on pure v2 machines the only one; on hybrid ones
//     systemd mirrors its own tree there;
//  2. the v1 "name=systemd" hierarchy — what the original Cantal used;
//  3. the v1 memory, cpuacct and cpu controllers, in that order (container runtimes always
//     use these);
//  4. any other v1 hierarchy, in file order.
//
// A process whose every path is "/" has no cgroup (empty name, no cgroup label).
//
// Its name is made as the original Cantal does: the path's components with ".slice" and
// ".scope" or ".service" stripped, joined with dots, so "/system.slice/nginx.service" is
// "system.nginx" and "/docker/ab12" is "docker.ab12". Everything under "/user.slice" is the
// one cgroup "user": the original skipped user sessions entirely because they produce endless
// random names; we keep their processes visible but bounded in number.

// cgroupName returns the name of a cgroup path and the path of the cgroup directory whose
// files measure that name (the path itself, or "/user.slice" for anything under it). The root
// has the empty name.
func cgroupName(path []byte) (name string, dir string) {
	var b strings.Builder
	rest := path
	for len(rest) > 0 {
		var c []byte
		if i := kfile.IndexByte(rest, '/'); i >= 0 {
			c, rest = rest[:i], rest[i+1:]
		} else {
			c, rest = rest, nil
		}
		if len(c) == 0 || bytes.Equal(c, []byte(".")) || bytes.Equal(c, []byte("..")) {
			continue
		}
		if b.Len() == 0 && bytes.Equal(c, []byte("user.slice")) {
			return "user", "/user.slice"
		}
		switch {
		case bytes.HasSuffix(c, []byte(".slice")) && len(c) > len(".slice"):
			c = c[:len(c)-len(".slice")]
		case bytes.HasSuffix(c, []byte(".scope")) && len(c) > len(".scope"):
			c = c[:len(c)-len(".scope")]
		case bytes.HasSuffix(c, []byte(".service")) && len(c) > len(".service"):
			c = c[:len(c)-len(".service")]
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(c)
	}
	if b.Len() == 0 {
		return "", "/"
	}
	return kfile.ValidString([]byte(b.String())), string(path)
}

// hasController reports whether a comma-separated controller list contains name.
func hasController(list []byte, name string) bool {
	for len(list) > 0 {
		var c []byte
		if i := kfile.IndexByte(list, ','); i >= 0 {
			c, list = list[:i], list[i+1:]
		} else {
			c, list = list, nil
		}
		if string(c) == name {
			return true
		}
	}
	return false
}

func isRoot(path []byte) bool { return len(path) == 1 && path[0] == '/' }

// chooseCgroup returns the index of the line that decides a process's cgroup (see above), or -1
// when every path is the root.
func chooseCgroup(lines []cgroupLine) int {
	best, bestRank := -1, 1<<30
	for i, l := range lines {
		if isRoot(l.Path) {
			continue
		}
		rank := 100 + i
		switch {
		case string(l.ID) == "0" && len(l.Controllers) == 0:
			rank = 0
		case string(l.Controllers) == "name=systemd":
			rank = 1
		case hasController(l.Controllers, "memory"):
			rank = 2
		case hasController(l.Controllers, "cpuacct"):
			rank = 3
		case hasController(l.Controllers, "cpu"):
			rank = 4
		}
		if rank < bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}
