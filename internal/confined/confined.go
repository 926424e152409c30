// Package confined opens files that an untrusted party names, on that party's behalf, without
// letting it read through the agent (which runs as root) anything it could not read itself, nor
// learn anything about places it cannot look into.
//
// A Policy resolves the path inside the process's root directory as if chrooted there
// (openat2 RESOLVE_IN_ROOT on /proc/PID/root, so absolute symlinks in a container cannot escape to
// the host), refuses magic links and a symlink as the last component, first opens the file with
// O_PATH so that opening a device or a FIFO has no side effect, checks that it is a regular file
// owned by the process's uid with the owner-read bit set and not larger than the size cap, and only
// then opens it for reading (O_NONBLOCK) through the already-checked inode.
//
// With a Cred (Policy.Cred), the path is resolved with the process's file-system identity
// (fsuid, fsgid, groups, on a thread of its own; see Cred): the kernel checks search permission
// on every directory exactly as for the process. A lookup the process could not make is refused
// with ReasonUnreachable whatever the path names, or whether it names anything, so refusals
// never tell what exists inside a directory the process cannot search; "no such file" (an error
// wrapping fs.ErrNotExist) only ever reports what the process could see for itself.
//
// A Dir is a directory held open so that names are looked up in it one component at a time,
// never through a path walked again as root. Policy.OpenDir resolves one on a process's behalf
// (it must be searchable by the process); OpenTrustedDir opens a directory the agent itself is
// configured with (the rrdd plugin directory) only if root put every component of its path
// there: a directory or symlink that another user could have planted (squatted) in a
// world-writable directory such as /dev/shm is refused, whatever it points to.
//
// Errors never quote file contents: a RefusedError says which path was refused and a fixed
// reason.
package confined

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Policy says where a path is resolved and whose file it must be. The zero value resolves paths
// from "/" with no owner check and no size cap. A Policy is a value; it is safe for concurrent use.
type Policy struct {
	// Root is the directory the path is resolved in, as a chroot; "" means "/". For a process
	// it is "/proc/PID/root".
	Root string
	// UID is the uid that must own the file. A negative UID, or 0 (root may read anything),
	// skips the owner check.
	UID int
	// MaxSize, when positive, refuses files larger than this many bytes.
	MaxSize int64
	// Cred, when not nil, is the identity the path is resolved as: the process's, so that it
	// reaches only what the process could reach (see the package documentation). Lookups it
	// is not allowed to make are refused with ReasonUnreachable.
	Cred *Cred
}

// ReasonUnreachable is the reason of every refusal of a path that the process's identity
// (Policy.Cred) could not resolve, whatever lies there.
const ReasonUnreachable = "not readable by the process's owner"

// RefusedError is returned when a file exists but the policy refuses it.
type RefusedError struct {
	Path   string
	Reason string
}

func (e *RefusedError) Error() string { return e.Path + ": refused: " + e.Reason }

// ErrRefused matches every RefusedError with errors.Is.
var ErrRefused = errors.New("refused")

// Is makes errors.Is(err, ErrRefused) true for a RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Open opens path for reading under the policy. The caller owns the returned file.
func (p Policy) Open(path string) (*os.File, error) {
	f, _, err := p.OpenStat(path)
	return f, err
}

// OpenStat is Open that also returns the file's stat, as checked.
func (p Policy) OpenStat(path string) (*os.File, *unix.Stat_t, error) {
	pfd, err := p.resolve(path, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(pfd)
	return p.checkOpen(pfd, path)
}

// resolve opens path (flags added to O_PATH|O_NOFOLLOW) under the policy's root and identity,
// and returns the O_PATH descriptor.
func (p Policy) resolve(path string, flags uint64) (int, error) {
	dirfd := unix.AT_FDCWD
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	}
	if p.Root != "" && p.Root != "/" {
		rfd, err := unix.Open(p.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("open root %s: %w", p.Root, err)
		}
		defer unix.Close(rfd)
		dirfd = rfd
		how.Resolve |= unix.RESOLVE_IN_ROOT
	}
	var pfd int
	err := p.Cred.as(func() (err error) {
		pfd, err = openat2(dirfd, path, &how)
		return err
	})
	if err != nil {
		return -1, p.openError(path, err)
	}
	return pfd, nil
}

// openError turns the error of a lookup of path into the one returned to the caller.
func (p Policy) openError(path string, err error) error {
	switch {
	case err == errIdentity:
		return &RefusedError{path, errIdentity.Error()}
	case errors.Is(err, unix.ELOOP):
		return &RefusedError{path, "symbolic link"}
	case p.Cred != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)):
		return &RefusedError{path, ReasonUnreachable}
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}

// checkOpen checks the file pfd (an O_PATH descriptor of path) against the policy and opens it
// for reading.
func (p Policy) checkOpen(pfd int, path string) (*os.File, *unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := p.check(path, &st); err != nil {
		return nil, nil, err
	}
	// Re-open the checked inode itself for reading: /proc/self/fd/N of an O_PATH descriptor
	// names exactly the inode just checked, whatever happened to the path meanwhile.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "reopen", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), &st, nil
}

func (p Policy) check(path string, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return &RefusedError{path, "symbolic link"}
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &RefusedError{path, "not a regular file"}
	case p.UID > 0 && int(st.Uid) != p.UID:
		return &RefusedError{path, fmt.Sprintf("owned by uid %d, not by the process's uid %d", st.Uid, p.UID)}
	case p.UID > 0 && st.Mode&0o400 == 0:
		return &RefusedError{path, "not readable by its owner"}
	case p.MaxSize > 0 && st.Size > p.MaxSize:
		return &RefusedError{path, fmt.Sprintf("size %d exceeds the limit of %d bytes", st.Size, p.MaxSize)}
	}
	return nil
}

func openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	// EAGAIN means a rename raced with RESOLVE_IN_ROOT's checks; retry a few times only, so a
	// process renaming in a loop cannot hold the scan.
	var err error
	for range 8 {
		var fd int
		fd, err = unix.Openat2(dirfd, path, how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
	return -1, err
}
