package confined

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a directory held open (an O_PATH descriptor) to look names up in, one component at a
// time: whatever happens to the path it was opened by afterwards (a parent renamed, a component
// replaced by a symlink), lookups in a Dir stay in that directory. A Dir is not safe for
// concurrent use with its Close.
type Dir struct {
	fd   int
	path string // as given, for messages
	st   unix.Stat_t
}

// Path returns the path the directory was opened by, for messages.
func (d *Dir) Path() string { return d.path }

// FDPath returns "/proc/self/fd/N": a path that names the directory itself (the kernel follows
// it to the open directory without walking any path again), for interfaces that take a path,
// such as inotify or a reader that lstats its files. A name looked up under it is looked up in
// the directory with the agent's privileges: use it only for a directory whose entries the
// party it was opened for may see (one from Policy.OpenDir or OpenTrustedDir).
func (d *Dir) FDPath() string { return "/proc/self/fd/" + strconv.Itoa(d.fd) }

// Stat returns the directory's stat as it was when opened.
func (d *Dir) Stat() *unix.Stat_t { return &d.st }

// Close releases the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Names returns the names of the directory's entries, sorted, without "." and "..".
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// RootPlaced reports whether only root can have put the entry with stat st where it is in d:
// see rootPlaced.
func (d *Dir) RootPlaced(st *unix.Stat_t) bool { return rootPlaced(&d.st, st) }

// OpenDir opens the directory at path under the policy's Root and Cred (the owner and size
// rules do not apply to directories). Symlinks are followed, inside Root and as Cred. The
// directory must be searchable by Cred: one that is not is refused with ReasonUnreachable,
// exactly as a path through it would be, so that names are never looked up in it on the
// process's behalf.
func (p Policy) OpenDir(path string) (*Dir, error) {
	dirfd := unix.AT_FDCWD
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	}
	if p.Root != "" && p.Root != "/" {
		rfd, err := unix.Open(p.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open root %s: %w", p.Root, err)
		}
		defer unix.Close(rfd)
		dirfd = rfd
		how.Resolve |= unix.RESOLVE_IN_ROOT
	}
	fd := -1
	err := p.Cred.as(func() error {
		pfd, err := openat2(dirfd, path, &how)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		// Looking up "." in it needs search permission on the directory itself, which the
		// lookup of path did not (it needed search permission on its parents only).
		fd, err = unix.Openat(pfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, &os.PathError{Op: "open", Path: path, Err: err} // a loop of symlinks
		}
		return nil, p.openError(path, err)
	}
	d := &Dir{fd: fd, path: path}
	if err := unix.Fstat(fd, &d.st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return d, nil
}

// OpenAt is Open of name inside d: name must be a single path component, and is looked up in d
// as the policy's Cred without following any symlink. The policy's Root is not used.
func (p Policy) OpenAt(d *Dir, name string) (*os.File, *unix.Stat_t, error) {
	path := filepath.Join(d.path, name)
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, nil, &RefusedError{path, "not a single file name"}
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	var pfd int
	err := p.Cred.as(func() (err error) {
		pfd, err = openat2(d.fd, name, &how)
		return err
	})
	if err != nil {
		return nil, nil, p.openError(path, err)
	}
	defer unix.Close(pfd)
	return p.checkOpen(pfd, path)
}

// maxSymlinks bounds the symlinks OpenTrustedDir follows, as the kernel's MAXSYMLINKS.
const maxSymlinks = 40

// OpenTrustedDir opens the directory at path (made absolute) for the agent itself, walking it
// from "/" one component at a time without letting the kernel follow any symlink, and refuses
// it unless root put every component where it is (see rootPlaced):
//
//   - a directory or symlink in a directory that users other than root may write to is refused
//     ("squatted") unless it is root's and the directory is sticky (so only root can have
//     created, renamed or removed it): a user who creates /dev/shm/metrics first, as a
//     directory of their own or as a symlink to anywhere, gets the same refusal whatever the
//     symlink points to, and the agent never looks at its target;
//   - symlinks that pass are followed (a root-made /dev/shm -> /run/shm), at most 40;
//   - the directory itself may be another user's if root put it there (its parent is root's
//     and closed); its entries are then that user's to choose, which callers learn from
//     Dir.RootPlaced.
//
// A missing component gives an error wrapping fs.ErrNotExist; a refusal is a RefusedError
// naming the component refused.
func OpenTrustedDir(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	type level struct {
		fd   int
		path string
		st   unix.Stat_t
	}
	var stack []level
	defer func() {
		for _, l := range stack {
			unix.Close(l.fd)
		}
	}()
	push := func(fd int, path string) error {
		l := level{fd: fd, path: path}
		if err := unix.Fstat(fd, &l.st); err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "fstat", Path: path, Err: err}
		}
		stack = append(stack, l)
		return nil
	}
	pop := func() {
		if len(stack) > 1 {
			unix.Close(stack[len(stack)-1].fd)
			stack = stack[:len(stack)-1]
		}
	}
	toRoot := func() error {
		for len(stack) > 1 {
			pop()
		}
		if len(stack) == 1 {
			return nil
		}
		fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: "/", Err: err}
		}
		if err := push(fd, "/"); err != nil {
			return err
		}
		if st := &stack[0].st; st.Uid != 0 || st.Mode&0o022 != 0 {
			return &RefusedError{"/", "the root directory is not root's alone"}
		}
		return nil
	}
	if err := toRoot(); err != nil {
		return nil, err
	}
	todo := strings.Split(abs, "/")
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			pop()
			continue
		}
		parent := &stack[len(stack)-1]
		at := filepath.Join(parent.path, name)
		fd, err := unix.Openat(parent.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: at, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "fstat", Path: at, Err: err}
		}
		typ := st.Mode & unix.S_IFMT
		if (typ == unix.S_IFDIR || typ == unix.S_IFLNK) && !rootPlaced(&parent.st, &st) {
			unix.Close(fd)
			what := "directory"
			if typ == unix.S_IFLNK {
				what = "symbolic link"
			}
			return nil, &RefusedError{at, fmt.Sprintf("squatted: a %s of uid %d in a directory others can write to", what, st.Uid)}
		}
		switch typ {
		case unix.S_IFDIR:
			if err := push(fd, at); err != nil {
				return nil, err
			}
		case unix.S_IFLNK:
			target, err := readlink(fd)
			unix.Close(fd)
			if err != nil {
				return nil, &os.PathError{Op: "readlink", Path: at, Err: err}
			}
			if links++; links > maxSymlinks {
				return nil, &RefusedError{at, "too many symbolic links"}
			}
			if strings.HasPrefix(target, "/") {
				if err := toRoot(); err != nil {
					return nil, err
				}
			}
			todo = append(strings.Split(target, "/"), todo...)
		default:
			unix.Close(fd)
			return nil, &os.PathError{Op: "open", Path: at, Err: unix.ENOTDIR}
		}
	}
	top := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	return &Dir{fd: top.fd, path: path, st: top.st}, nil
}

// readlink returns the target of the symlink open as the O_PATH descriptor fd.
func readlink(fd int) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// rootPlaced reports whether only root can have put the entry with stat e in the directory
// with stat dir (and only root can have given it its name there):
//
//   - dir is root's and no one else may write to it (no group or other write bit), or
//   - dir is root's and sticky (like /dev/shm or /tmp), the entry is root's too (in a sticky
//     directory only an entry's owner, the directory's owner and root may rename or remove
//     it), and, unless it is a directory, it has a single link (a second one may be another
//     user's hard link to root's file).
func rootPlaced(dir, e *unix.Stat_t) bool {
	if dir.Uid != 0 {
		return false
	}
	if dir.Mode&0o022 == 0 {
		return true
	}
	return dir.Mode&unix.S_ISVTX != 0 && e.Uid == 0 && (e.Mode&unix.S_IFMT == unix.S_IFDIR || e.Nlink == 1)
}
