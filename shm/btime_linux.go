package shm

import "golang.org/x/sys/unix"

// birthNs returns the creation time of the file at path (not following a final symlink) in
// nanoseconds, and whether the file system reports one.
func birthNs(path string) (int64, bool) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BTIME, &stx); err != nil {
		return 0, false
	}
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0, false
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec), true
}
