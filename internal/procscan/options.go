package procscan

import (
	"os"

	"github.com/cantal-go/cantal/internal/containers"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Options says where the process scan finds procfs and sysfs, and what it may keep open. The
// zero value means the host's own /proc and /sys. Options are copied by NewProcesses and never
// modified.
type Options struct {
	// Proc is the procfs mount point, "/proc" when empty. An agent running in a container with
	// the host's procfs mounted elsewhere sets it (e.g. "/host/proc").
	Proc string
	// Sys is the sysfs mount point, "/sys" when empty. Cgroup hierarchies are looked up under
	// Sys/fs/cgroup.
	Sys string
	// ClockTick is USER_HZ, the unit of the tick counters in /proc/stat and /proc/PID/stat;
	// 100 when zero (the value on every Linux architecture Go supports).
	ClockTick int
	// PageSize is the size of a memory page in bytes; os.Getpagesize() when zero.
	PageSize int
	// MaxRead caps how much of /proc/PID/cmdline and /proc/PID/environ is read; 64 KiB when
	// zero. A longer command line is truncated; a CANTAL_PATH beyond the cap is not seen.
	MaxRead int
	// KeepOpen is how many /proc/PID files Processes keeps open between scans, re-reading each
	// with a single pread(2): the schedstat of every single-threaded process (unless the task
	// iterator reads them all, see NoTaskIter) and the stat of every process that runs (see
	// idle.go), io while the budget has room for two files a
	// process, status and cgroup while it has room for all five (with open, read and close
	// otherwise). 32768 when zero, none when negative, and never more than the RLIMIT_NOFILE
	// soft limit less a quarter of it (at least 1024 less, and at most half of a limit of
	// 2048 or under), which leaves the rest to sockets and applications' files. Each costs the
	// kernel about a page of memory while it is open (40 MiB for 10 000 sleeping processes);
	// processes beyond the budget are read with open, read and close, which costs about three
	// times as much CPU: 10k churning processes cost 450 ms of CPU per scan with a budget of
	// 4096 files.
	KeepOpen int
	// CgroupKeepOpen is how many cgroup files (and containers' /proc/PID/net/dev) the scan keeps
	// open between scans, re-reading each with a single pread(2) instead of open, read and
	// close (see cgroup_files.go): up to nine files a cgroup v2 cgroup with processes. 8192
	// when zero (900 cgroups), none when negative, and never more than half of the
	// RLIMIT_NOFILE allowance of KeepOpen (taken from it: a cgroup's files are read at every
	// scan, most processes' files are not). Each open file costs the kernel
	// about 4.5 KiB while it is open (its seq_file buffer and struct file): 36 MiB at 8192.
	// Files beyond it are read with open, read and close, which costs about three times as
	// much CPU.
	CgroupKeepOpen int
	// NoTaskIter makes Processes read each process's schedstat file even where the BPF task
	// iterator (package taskiter) can read them all in one pass: as root on a kernel with BTF,
	// with Proc "/proc" in the initial pid namespace (see taskiter.go).
	NoTaskIter bool
	// Containers names the containers among the cgroups: their series, and their processes',
	// carry container, image and container_id labels. Nil: none are named.
	Containers *containers.Resolver
	// States makes every scan also count the processes and threads per state, as
	// node_exporter's processes collector does (processes.*, node_processes_*; see
	// collectStates): the processes' from their stat lines, the threads of a multi-threaded
	// process from its <proc>/PID/task. Off by default, as node_exporter's collector.
	States bool

	// Kmsg is the kernel log device (/dev/kmsg) whose OOM-kill records count the kills of a
	// container gone by the next scan (see oomkmsg.go); empty: not read. Read as root.
	Kmsg string
}

func (o Options) withDefaults() Options {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Sys == "" {
		o.Sys = "/sys"
	}
	if o.ClockTick <= 0 {
		o.ClockTick = 100
	}
	if o.PageSize <= 0 {
		o.PageSize = os.Getpagesize()
	}
	if o.KeepOpen == 0 {
		o.KeepOpen = 32768
	}
	if o.CgroupKeepOpen == 0 {
		o.CgroupKeepOpen = 8192
	}
	o.KeepOpen, o.CgroupKeepOpen = max(o.KeepOpen, 0), max(o.CgroupKeepOpen, 0)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < 1<<40 {
		c := keepOpenCap(int(rl.Cur))
		o.CgroupKeepOpen = min(o.CgroupKeepOpen, c/2)
		o.KeepOpen = min(o.KeepOpen, c-o.CgroupKeepOpen)
	}
	if o.MaxRead <= 0 {
		o.MaxRead = 64 << 10
	}
	o.Proc = filepath.Clean(o.Proc)
	o.Sys = filepath.Clean(o.Sys)
	return o
}

// ticksToMs converts clock ticks to milliseconds.
func (o *Options) ticksToMs(t uint64) uint64 {
	if o.ClockTick == 100 {
		return t * 10
	}
	return t * 1000 / uint64(o.ClockTick)
}

// keepOpenCap is the most files Processes keeps open under an RLIMIT_NOFILE soft limit of
// limit: all but a quarter of it, and at least 1024, kept for everything else; half of a
// limit too small for that.
func keepOpenCap(limit int) int {
	return max(limit-max(limit/4, 1024), limit/2)
}
