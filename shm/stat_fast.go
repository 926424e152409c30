//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64 || ppc64le || s390x || mips64 || mips64le)

package shm

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cpath is a path ready for system calls: NUL-terminated, built once.
type cpath struct {
	s   string
	z   []byte
	bad bool // empty or contains NUL: no system call can take it
}

func newCPath(s string) cpath {
	z := make([]byte, len(s)+1)
	copy(z, s)
	return cpath{s: s, z: z, bad: len(s) == 0 || strings.IndexByte(s, 0) >= 0}
}

// lstat stats p without following a final symlink. Unlike unix.Lstat it does not allocate the
// NUL-terminated path on every call, which matters on the Reader's steady-state path.
func lstat(p *cpath, st *unix.Stat_t) error {
	if p.bad {
		return unix.EINVAL
	}
	atFDCWD := unix.AT_FDCWD
	_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&p.z[0])),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
