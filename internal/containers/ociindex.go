package containers

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ociSource is one place an OCI runtime, containerd or CRI-O keeps a directory per container:
// dir/<id>/file, or dir/<namespace>/<id>/file when nested; file may be in a subdirectory
// (CRI-O's userdata/config.json), whose change then tells that the file is to be read again.
type ociSource struct {
	rt     Runtime
	dir    string // below Options.Root
	nested bool
	file   string
	max    int64
	parse  func(b []byte, ns, id string) (string, Identity, error)
}

// ociEntry is what one container's state file said, kept while its directory stays the same.
type ociEntry struct {
	ino, ctime int64 // of the container's directory
	cg         string
	id         Identity
	ok         bool
}

// Caps of the OCI index: namespaces and containers listed per rebuild, and how long it is
// trusted when every lookup finds what it asks for.
const (
	maxNamespaces = 256
	maxOCIFile    = 1 << 20
	ociStale      = 10 * time.Second
)

func (r *Resolver) ociSources() []ociSource {
	return []ociSource{
		{Containerd, filepath.Join(r.opt.ContainerdState, "io.containerd.runtime.v2.task"), true, "config.json", maxOCIFile, ParseOCISpec},
		{CRIO, filepath.Join(r.opt.CRIOStorage, "overlay-containers"), false, "userdata/config.json", maxOCIFile, func(b []byte, _, id string) (string, Identity, error) { return ParseCRIOConfig(b, id) }},
		{OCI, r.opt.RuncRoot, false, "state.json", maxOCIFile, func(b []byte, _, id string) (string, Identity, error) { return ParseRuncState(b, id) }},
		{OCI, r.opt.CrunRoot, false, "status", maxOCIFile, func(b []byte, _, id string) (string, Identity, error) { return ParseCrunStatus(b, id) }},
	}
}

// ociID returns the identity of the OCI container (containerd's, runc's, crun's) whose cgroup
// is name or encloses it, the outermost one first. The index of cgroups is rebuilt when it is
// older than ociStale, or a second after the last rebuild when a lookup misses (a container
// just started). It also returns the length of the matching cgroup name, a prefix of name.
// r.mu is held.
func (r *Resolver) ociID(name string) (Identity, bool, int) {
	now := r.opt.Now()
	ident, ok, end := r.ociLookup(name)
	if r.ociAt.IsZero() || now.Sub(r.ociAt) >= ociStale || !ok && now.Sub(r.ociAt) >= recheck {
		r.ociAt = now
		r.rebuildOCI()
		ident, ok, end = r.ociLookup(name)
	}
	return ident, ok, end
}

func (r *Resolver) ociLookup(name string) (Identity, bool, int) {
	if len(r.ociByCg) == 0 || name == "" {
		return Identity{}, false, 0
	}
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if id, ok := r.ociByCg[name[:i]]; ok {
				return id, true, i
			}
		}
	}
	return Identity{}, false, 0
}

// rebuildOCI lists every source's containers again, re-reading only the state of a container
// whose directory is new or changed. The first source naming a cgroup wins. r.mu is held.
func (r *Resolver) rebuildOCI() {
	entries := make(map[string]ociEntry, len(r.oci))
	byCg := make(map[string]Identity, len(r.ociByCg))
	for _, src := range r.ociSources() {
		var nss []string
		if src.nested {
			nss = r.listDirs(src.dir, maxNamespaces)
		} else {
			nss = []string{""}
		}
		for _, ns := range nss {
			if src.nested && !validOCIID(ns) {
				continue
			}
			dir := filepath.Join(src.dir, ns)
			for _, d := range r.listDirStats(dir, maxCached-len(entries)) {
				if !validOCIID(d.name) {
					continue
				}
				key := filepath.Join(dir, d.name, src.file)
				if sub := filepath.Dir(src.file); sub != "." && !r.subDirStat(&d, filepath.Join(dir, d.name, sub)) {
					continue
				}
				e, ok := r.oci[key]
				if !ok || e.ino != d.ino || e.ctime != d.ctime { // new, or a file added or renamed in it
					e = ociEntry{ino: d.ino, ctime: d.ctime}
					if b, _, err := readTrusted(r.opt.Root, key, src.max); err == nil {
						if cg, id, err := src.parse(b, ns, d.name); err == nil && cg != "user" {
							e.cg, e.id, e.ok = cg, id, true
						}
					}
				}
				entries[key] = e
				if _, dup := byCg[e.cg]; e.ok && !dup {
					byCg[e.cg] = e.id
				}
			}
		}
	}
	r.oci, r.ociByCg = entries, byCg
}

type dirStat struct {
	name       string
	ino, ctime int64
}

// subDirStat replaces d's inode and change time by those of the directory rel (d's
// subdirectory holding its state file, which changes when that file is written), and reports
// whether rel is a directory (not a symlink). What it stats only tells when to read again: the
// read itself (readTrusted) checks every component.
func (r *Resolver) subDirStat(d *dirStat, rel string) bool {
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(r.opt.Root, rel), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	d.ino, d.ctime = int64(st.Ino), st.Ctim.Nano()
	return true
}

// listDirs returns the names of at most max subdirectories of the trusted directory rel.
func (r *Resolver) listDirs(rel string, max int) []string {
	var out []string
	for _, d := range r.listDirStats(rel, max) {
		out = append(out, d.name)
	}
	return out
}

// listDirStats lists at most max subdirectories (not symlinks) of the trusted directory rel,
// with their inode and change time. An absent or untrusted directory lists nothing.
func (r *Resolver) listDirStats(rel string, max int) []dirStat {
	if max <= 0 || rel == "" {
		return nil
	}
	fd, err := openTrustedDir(r.opt.Root, rel)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, _ := f.Readdirnames(max)
	out := make([]dirStat, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		out = append(out, dirStat{n, int64(st.Ino), st.Ctim.Nano()})
	}
	return out
}
