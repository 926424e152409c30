// Package atomicfile replaces files atomically and durably: the one writer the agent's state
// files (history snapshot, cluster peers and node id, carbon and remote-write positions) go
// through.
//
// Write (and WriteFile) guarantee, on Linux with a POSIX file system:
//
//   - The new content is written to a temporary file in the same directory as the target
//     (path + ".tmp", so on the same file system and a rename away), opened with O_NOFOLLOW:
//     a symlink planted at that name is refused, not followed.
//   - The temporary file gets exactly the mode asked for (fchmod: the umask does not apply).
//   - The temporary file is fsynced, then renamed over the target, then the directory is
//     fsynced (unless Options.NoDirSync leaves that to the caller, see SyncDir).
//   - No partial file is ever visible at path: a reader sees the old content or the new, whole.
//     After Write returns nil, a crash (process or machine) leaves the new content; a crash
//     during Write leaves the old content (or no file, if there was none) or, once the
//     rename is done, the new one, and at most a stale temporary file, which the next Write
//     to the same path truncates and reuses.
//   - On error the temporary file is removed and the old file is left untouched.
//
// The temporary name is fixed, so one path must have one writer at a time (every caller in
// the agent owns its file); writers of different paths may run concurrently. The package has
// no state.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TempSuffix is appended to the target's path to name its temporary file.
const TempSuffix = ".tmp"

// Options says how Write writes.
type Options struct {
	// Perm is the file's mode (permission bits), set exactly. Zero means 0o600.
	Perm fs.FileMode
	// NoDirSync skips the directory fsync after the rename. A caller writing several files
	// in one directory sets it and calls SyncDir once after the last: until then a machine
	// crash may lose the renames (leaving the old files or none), never expose a partial
	// file.
	NoDirSync bool
}

// WriteFile replaces the file at path with data, atomically and durably (see the package
// documentation), with mode perm.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	_, err := Write(path, Options{Perm: perm}, data)
	return err
}

// Write replaces the file at path with the concatenation of parts, atomically and durably
// (see the package documentation), and returns the number of bytes written. Errors name the
// path and the step that failed; they never quote the content.
func Write(path string, opt Options, parts ...[]byte) (size int64, err error) {
	perm := opt.Perm & fs.ModePerm
	if perm == 0 {
		perm = 0o600
	}
	tmp := path + TempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return 0, fmt.Errorf("write %s: create temporary file: %w", path, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return 0, fmt.Errorf("write %s: chmod: %w", path, err)
	}
	for _, p := range parts {
		if _, err = f.Write(p); err != nil {
			return 0, fmt.Errorf("write %s: %w", path, err)
		}
		size += int64(len(p))
	}
	if err = f.Sync(); err != nil {
		return 0, fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("write %s: close: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if !opt.NoDirSync {
		// The rename is done: on error here the new content is in place and only its
		// durability across a machine crash is in doubt.
		if err = SyncDir(filepath.Dir(path)); err != nil {
			return size, err
		}
	}
	return size, nil
}

// SyncDir fsyncs the directory dir, making the renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	cerr := d.Close()
	if err = errors.Join(err, cerr); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
