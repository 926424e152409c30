package containers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Options says where the runtimes keep their state. The zero value means the host's defaults.
type Options struct {
	// Root is prefixed to every runtime path, "/" when empty (e.g. "/host" for an agent in a
	// container with the host's root mounted there).
	Root string
	// PodmanStorage is containers/storage's graph root, "/var/lib/containers/storage" when
	// empty.
	PodmanStorage string
	// DockerRoot is dockerd's --data-root, "/var/lib/docker" when empty.
	DockerRoot string
	// ContainerdState is containerd's --state directory, "/run/containerd" when empty: its
	// task bundles (io.containerd.runtime.v2.task/<namespace>/<id>/config.json) name its
	// containers, Kubernetes' through CRI included.
	ContainerdState string
	// CRIOStorage is CRI-O's containers/storage root (crio.conf's root, crio --root),
	// "/var/lib/containers/storage" when empty: overlay-containers/<id>/userdata/config.json,
	// CRI-O's copy of each container's OCI spec, names its Kubernetes containers.
	CRIOStorage string
	// RuncRoot and CrunRoot are the plain OCI runtimes' --root directories, "/run/runc" and
	// "/run/crun" when empty: <id>/state.json (runc) and <id>/status (crun) name a container
	// no other runtime's state names, by its id.
	RuncRoot string
	CrunRoot string
	// Now is the clock, time.Now when nil (tests set it).
	Now func() time.Time
}

// Size caps of the files read, and how long results are trusted before the state is looked at
// again.
const (
	maxPodmanFile = 32 << 20
	maxDockerFile = 1 << 20
	recheck       = time.Second // containers.json is stat'ed at most this often
	retryMissing  = 2 * time.Second
	maxCached     = 4096 // Docker identities kept; the cache is emptied beyond
)

// Resolver finds the Identity of a container's cgroup. It is safe for concurrent use.
type Resolver struct {
	opt        Options
	podmanFile string // below opt.Root
	dockerDir  string // below opt.Root

	mu         sync.Mutex
	podman     map[string]Identity // guarded by mu, from the latest read of containers.json
	podmanStat unix.Stat_t         // of that read
	podmanAt   time.Time           // when containers.json was last stat'ed
	docker     map[string]dockerEntry
	oci        map[string]ociEntry // by state file, from the latest rebuildOCI
	ociByCg    map[string]Identity // by cgroup name, from the latest rebuildOCI
	ociAt      time.Time           // when the OCI index was last rebuilt
}

type dockerEntry struct {
	id    Identity
	ok    bool
	tried time.Time
}

// New returns a Resolver reading the runtimes' state under opt.
func New(opt Options) *Resolver {
	if opt.Root == "" {
		opt.Root = "/"
	}
	if opt.PodmanStorage == "" {
		opt.PodmanStorage = "/var/lib/containers/storage"
	}
	if opt.DockerRoot == "" {
		opt.DockerRoot = "/var/lib/docker"
	}
	if opt.ContainerdState == "" {
		opt.ContainerdState = "/run/containerd"
	}
	if opt.CRIOStorage == "" {
		opt.CRIOStorage = "/var/lib/containers/storage"
	}
	if opt.RuncRoot == "" {
		opt.RuncRoot = "/run/runc"
	}
	if opt.CrunRoot == "" {
		opt.CrunRoot = "/run/crun"
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Resolver{
		opt:        opt,
		podmanFile: filepath.Join(opt.PodmanStorage, "overlay-containers", "containers.json"),
		dockerDir:  filepath.Join(opt.DockerRoot, "containers"),
		docker:     map[string]dockerEntry{},
	}
}

// Identify returns the identity of the container whose cgroup this is (procscan's dotted name
// or a path), and whether the cgroup is a container's the runtime state names. Podman's and
// Docker's cgroups are known by their names and cost a map lookup, with the runtime's state
// re-read at most once a second (Podman) or once per container (Docker); any other cgroup is
// looked up in the index of containerd's and the OCI runtimes' containers by cgroup (see
// ociID), rebuilt at most once a second. Errors reading the state (absent runtime, untrusted
// owner or mode, oversized or malformed file) leave the container unnamed.
func (r *Resolver) Identify(cgroup string) (Identity, bool) {
	if strings.Contains(cgroup, "/") {
		cgroup = CgroupName(cgroup)
	}
	r.mu.Lock()
	oci, ociOK, ociEnd := r.ociID(cgroup)
	r.mu.Unlock()
	// The outermost container wins: an OCI container's cgroup enclosing one named like a
	// Podman or Docker container's is the OCI container's.
	rt, id := FromCgroup(cgroup)
	if rt != NoRuntime && (!ociOK || ociEnd >= strings.Index(cgroup, id)+len(id)) {
		var ident Identity
		var ok bool
		if rt == Podman {
			ident, ok = r.podmanID(id)
		} else {
			ident, ok = r.dockerID(id)
		}
		if ok {
			return ident, true
		}
	}
	return oci, ociOK
}

func (r *Resolver) podmanID(id string) (Identity, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.opt.Now(); r.podmanAt.IsZero() || now.Sub(r.podmanAt) >= recheck {
		r.podmanAt = now
		r.reloadPodman()
	}
	ident, ok := r.podman[id]
	return ident, ok
}

// reloadPodman reads containers.json again when it changed; a file that cannot be trusted or
// parsed keeps the previous list. r.mu is held.
func (r *Resolver) reloadPodman() {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(r.opt.Root, r.podmanFile), &st); err != nil || sameFile(&st, &r.podmanStat) {
		return
	}
	b, st2, err := readTrusted(r.opt.Root, r.podmanFile, maxPodmanFile)
	if err != nil {
		return
	}
	m, err := ParsePodmanContainers(b)
	if err != nil {
		return
	}
	r.podman, r.podmanStat = m, st2
}

func sameFile(a, b *unix.Stat_t) bool {
	return a.Ino == b.Ino && a.Dev == b.Dev && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

func (r *Resolver) dockerID(id string) (Identity, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opt.Now()
	if e, ok := r.docker[id]; ok && (e.ok || now.Sub(e.tried) < retryMissing) {
		return e.id, e.ok
	}
	if len(r.docker) >= maxCached {
		clear(r.docker)
	}
	e := dockerEntry{tried: now}
	if b, _, err := readTrusted(r.opt.Root, filepath.Join(r.dockerDir, id, "config.v2.json"), maxDockerFile); err == nil {
		if ident, err := ParseDockerConfig(b, id); err == nil {
			e.id, e.ok = ident, true
		}
	}
	r.docker[id] = e
	return e.id, e.ok
}

// errUntrusted is the error of a file or directory that root does not own alone.
var errUntrusted = errors.New("not owned by root or writable by others")

// readTrusted reads at most limit bytes of root/rel, which with every directory from root down
// must be owned by root and writable by no group or other user; no component below root may
// be a symlink. Root itself is the operator's (Options.Root) and may be one.
func readTrusted(root, rel string, limit int64) ([]byte, unix.Stat_t, error) {
	var st unix.Stat_t
	rel = filepath.Clean("/" + rel)[1:]
	path := filepath.Join(root, rel)
	if rel == "" {
		return nil, st, fmt.Errorf("%s: no file", path)
	}
	dirRel, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dirRel, name = rel[:i], rel[i+1:]
	}
	dir, err := openTrustedDir(root, dirRel)
	if err != nil {
		return nil, st, err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dir)
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, fmt.Errorf("%s: not a regular file", path)
	}
	if err := trustedStat(&st); err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size > limit {
		return nil, st, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, st, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, st, nil
}

// openTrustedDir opens the directory root/rel ("" is root), walking down from root with
// O_NOFOLLOW|O_DIRECTORY and checking that root and each directory below it is trusted (see
// trustedStat). The caller closes the descriptor.
func openTrustedDir(root, rel string) (int, error) {
	rel = filepath.Clean("/" + rel)[1:]
	path := filepath.Join(root, rel)
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	rest := rel
	for {
		if err := trusted(dir); err != nil {
			unix.Close(dir)
			return -1, fmt.Errorf("%s: %w", path, err)
		}
		if rest == "" {
			return dir, nil
		}
		name := rest
		if i := indexSlash(rest); i >= 0 {
			name, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		next, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", path, err)
		}
		dir = next
	}
}

func indexSlash(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

func trusted(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	return trustedStat(&st)
}

// trustedStat accepts what root owns and no group or other user may write; a directory with
// the sticky bit (e.g. /tmp) is not accepted either.
func trustedStat(st *unix.Stat_t) error {
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		return errUntrusted
	}
	return nil
}
