package confined

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Cred is the file-system identity of a process: the uid and gid the kernel checks its file
// accesses with (its fsuid and fsgid, normally its effective ids) and its supplementary groups.
// A Policy with a Cred resolves paths as that identity (see Policy.Cred).
type Cred struct {
	UID, GID int
	Groups   []int
}

// maxGroups is the kernel's NGROUPS_MAX.
const maxGroups = 65536

// ParseCred parses the Uid, Gid and Groups lines of a /proc/PID/status file: the fourth field
// of Uid and Gid (the file-system ids) and every group of Groups. Other lines are ignored.
// Errors do not quote the input.
func ParseCred(status []byte) (Cred, error) {
	var c Cred
	var haveUID, haveGID, haveGroups bool
	for len(status) > 0 {
		line := status
		if i := bytes.IndexByte(status, '\n'); i >= 0 {
			line, status = status[:i], status[i+1:]
		} else {
			status = nil
		}
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(key) {
		case "Uid", "Gid":
			f := bytes.Fields(rest)
			if len(f) != 4 {
				return Cred{}, fmt.Errorf("status: %s line has %d fields, want 4", key, len(f))
			}
			id, err := parseID(f[3])
			if err != nil {
				return Cred{}, fmt.Errorf("status: %s line: %w", key, err)
			}
			if key[0] == 'U' {
				c.UID, haveUID = id, true
			} else {
				c.GID, haveGID = id, true
			}
		case "Groups":
			f := bytes.Fields(rest)
			if len(f) > maxGroups {
				return Cred{}, fmt.Errorf("status: %d groups, more than %d", len(f), maxGroups)
			}
			c.Groups = make([]int, 0, len(f))
			for _, g := range f {
				id, err := parseID(g)
				if err != nil {
					return Cred{}, fmt.Errorf("status: Groups line: %w", err)
				}
				c.Groups = append(c.Groups, id)
			}
			haveGroups = true
		}
	}
	if !haveUID || !haveGID || !haveGroups {
		return Cred{}, errors.New("status: Uid, Gid or Groups line missing")
	}
	return c, nil
}

// parseID parses a decimal uid or gid; 4294967295 is (uid_t)-1, never an id.
func parseID(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 10 {
		return 0, errors.New("bad id")
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("bad id")
		}
		n = n*10 + int(c-'0')
	}
	if n >= 1<<32-1 {
		return 0, errors.New("id out of range")
	}
	return n, nil
}

// ProcessCred returns the file-system identity of process pid, read from proc's
// PID/status ("/proc" when proc is ""). A process that is gone gives an error wrapping
// fs.ErrNotExist.
func ProcessCred(proc string, pid int) (Cred, error) {
	if proc == "" {
		proc = "/proc"
	}
	b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			err = os.ErrNotExist
		}
		return Cred{}, fmt.Errorf("identity of pid %d: %w", pid, err)
	}
	c, err := ParseCred(b)
	if err != nil {
		return Cred{}, fmt.Errorf("identity of pid %d: %w", pid, err)
	}
	return c, nil
}

// errIdentity is returned when the agent cannot take a Cred's identity (it does not run as
// root).
var errIdentity = errors.New("cannot take the identity of the process's owner")

// as runs fn with the thread's file-system identity set to c, so that the kernel checks every
// path lookup fn makes exactly as it would for a process of c: search permission on each
// directory, ACLs, protected_symlinks. A nil c, uid 0 (root may search anything) or the
// agent's own uid and gid run fn as the agent is.
//
// fsuid, fsgid and the supplementary groups are per thread in Linux, so fn runs on a goroutine
// locked to its OS thread; the thread is given back to the runtime only once its identity is
// verified to be the agent's again, and otherwise ends with the goroutine (the runtime never
// reuses a thread whose goroutine exits locked). fn must not start goroutines that touch files.
func (c *Cred) as(fn func() error) error {
	if c == nil || c.UID == 0 || c.UID == os.Geteuid() && c.GID == os.Getegid() {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		clean := false
		defer func() {
			if clean {
				runtime.UnlockOSThread()
			}
		}()
		groups, err := unix.Getgroups()
		if err != nil {
			clean = true
			done <- err
			return
		}
		uid, gid := fsuid(), fsgid()
		err = c.enter()
		if err == nil {
			err = fn()
		}
		clean = leave(uid, gid, groups)
		done <- err
	}()
	return <-done
}

// enter sets the calling thread's groups, fsgid and fsuid to c's, and checks they took.
func (c *Cred) enter() error {
	if err := unix.Setgroups(c.Groups); err != nil {
		return errIdentity
	}
	unix.SetfsgidRetGid(c.GID)
	if fsgid() != c.GID {
		return errIdentity
	}
	unix.SetfsuidRetUid(c.UID)
	if fsuid() != c.UID {
		return errIdentity
	}
	return nil
}

// leave restores the calling thread's identity and reports whether it is the one given.
func leave(uid, gid int, groups []int) bool {
	unix.SetfsuidRetUid(uid)
	unix.SetfsgidRetGid(gid)
	if err := unix.Setgroups(groups); err != nil {
		return false
	}
	now, err := unix.Getgroups()
	return err == nil && fsuid() == uid && fsgid() == gid && slices.Equal(now, groups)
}

// fsuid and fsgid return the calling thread's file-system ids: setfsuid(-1) changes nothing
// and returns the current one.
func fsuid() int { id, _ := unix.SetfsuidRetUid(-1); return id }
func fsgid() int { id, _ := unix.SetfsgidRetGid(-1); return id }
