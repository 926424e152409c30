//go:build unix && !(linux && (amd64 || arm64 || riscv64 || loong64 || ppc64 || ppc64le || s390x || mips64 || mips64le))

package shm

import (
	"strings"

	"golang.org/x/sys/unix"
)

// cpath is a path ready for system calls.
type cpath struct {
	s   string
	bad bool
}

func newCPath(s string) cpath {
	return cpath{s: s, bad: len(s) == 0 || strings.IndexByte(s, 0) >= 0}
}

// lstat stats p without following a final symlink.
func lstat(p *cpath, st *unix.Stat_t) error {
	if p.bad {
		return unix.EINVAL
	}
	return unix.Lstat(p.s, st)
}
