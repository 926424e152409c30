package flagfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/confined"
)

// MaxSize bounds a configuration file: larger ones are refused unread.
const MaxSize = 1 << 20

// maxLinks bounds the symbolic links Read follows, as the kernel's MAXSYMLINKS.
const maxLinks = 40

// Read returns the contents of the configuration file at path, refusing (with an error
// matching confined.ErrRefused) a file that a user other than root and the agent's own
// effective user could have written or chosen:
//
//   - every symbolic link followed from path (a chain of at most 40) must be owned by root
//     or the agent's user: another user's link would choose which file configures the agent;
//   - the file must be a regular file owned by root or the agent's user, not writable by
//     others (mode o+w), and writable by its group only when the group is root's or the
//     agent's effective group; at most MaxSize bytes;
//   - every directory it really is in, up to "/", must be owned by root or the agent's user
//     and not writable by others or an untrusted group, unless it is sticky (then only the
//     file's owner, who is trusted, can replace the file): as sshd's StrictModes; and a
//     symbolic link among the directories of the path given must be a trusted user's.
//
// The file's checks are made on the descriptor that is read (opened without following a
// symbolic link), so a file swapped in between is never read unchecked. Errors never quote
// the contents.
func Read(path string) ([]byte, error) {
	euid, egid := os.Geteuid(), os.Getegid()
	trustedUID := func(uid uint32) bool { return uid == 0 || int(uid) == euid }
	trustedGID := func(gid uint32) bool { return gid == 0 || int(gid) == egid }
	refuse := func(reason string) error { return &confined.RefusedError{Path: path, Reason: reason} }

	// A symbolic link among the directories of the path, as the kernel resolves them, must be
	// a trusted user's too.
	if abs, err := filepath.Abs(path); err == nil {
		for dir := filepath.Dir(abs); dir != "/"; dir = filepath.Dir(dir) {
			var st unix.Stat_t
			if unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK && !trustedUID(st.Uid) {
				return nil, refuse(fmt.Sprintf("symbolic link %s is owned by uid %d, neither root nor the agent's user", dir, st.Uid))
			}
		}
	}
	p := path
	for links := 0; ; links++ {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return nil, &os.PathError{Op: "stat", Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			break
		}
		if links == maxLinks {
			return nil, refuse("too many symbolic links")
		}
		if !trustedUID(st.Uid) {
			return nil, refuse(fmt.Sprintf("symbolic link %s is owned by uid %d, neither root nor the agent's user", p, st.Uid))
		}
		target, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, refuse("replaced by a symbolic link while being opened")
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, refuse("not a regular file")
	case !trustedUID(st.Uid):
		return nil, refuse(fmt.Sprintf("owned by uid %d, neither root nor the agent's user", st.Uid))
	case st.Mode&0o002 != 0:
		return nil, refuse("writable by every user")
	case st.Mode&0o020 != 0 && !trustedGID(st.Gid):
		return nil, refuse(fmt.Sprintf("writable by group %d, neither root's nor the agent's", st.Gid))
	case st.Size > MaxSize:
		return nil, refuse(fmt.Sprintf("larger than %d bytes", MaxSize))
	}
	// The directories the file really is in (the kernel's path of the open file, no links),
	// from its own up to "/", as sshd's StrictModes checks them.
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(real) {
		return nil, refuse("the path of the open file is not known")
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		var dst unix.Stat_t
		if err := unix.Stat(dir, &dst); err != nil {
			return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
		}
		sticky := dst.Mode&unix.S_ISVTX != 0
		switch {
		case !trustedUID(dst.Uid):
			return nil, refuse(fmt.Sprintf("directory %s is owned by uid %d, neither root nor the agent's user", dir, dst.Uid))
		case !sticky && dst.Mode&0o002 != 0:
			return nil, refuse(fmt.Sprintf("directory %s is writable by every user", dir))
		case !sticky && dst.Mode&0o020 != 0 && !trustedGID(dst.Gid):
			return nil, refuse(fmt.Sprintf("directory %s is writable by group %d, neither root's nor the agent's", dir, dst.Gid))
		}
		if dir == "/" {
			break
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > MaxSize {
		return nil, refuse(fmt.Sprintf("larger than %d bytes", MaxSize))
	}
	return data, nil
}
