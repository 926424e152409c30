package procscan

import (
	"os"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

// cgroupInfo is the meaning of one distinct /proc/PID/cgroup content, shared by every process
// with that content. Dirs are absolute paths of cgroup directories, empty when that controller
// does not measure the cgroup Name (its path for the process is another cgroup, e.g. the root).
type cgroupInfo struct {
	Name          string
	V2Dir         string
	MemDir        string
	CPUAcctDir    string
	CPUDir        string // v1 cpu controller: CFS throttling in cpu.stat
	BlkioDir      string // v1 blkio controller: blkio.throttle.io_service_bytes, io_serviced
	PidsDir       string // v1 pids controller: pids.current, pids.max
	scanmark.Mark        // the latest scan that saw it

	// The container the cgroup is, when Options.Containers names it (see containerLabels).
	ctr      containers.Identity
	ctrOK    bool   // ctr is known
	ctrWant  bool   // the cgroup may be a container's: ask again until named
	ctrTried uint64 // the scan that last asked
	ctrKeyS  string // ctrKey's value, made when ctr changes
}

// ctrRetry is how many scans apart an unnamed container cgroup is looked up again (its runtime
// may write its state after the first process is seen); ctrRefresh, a named one (a container
// renamed shows under its new name within that many scans, a minute at the default interval).
const (
	ctrRetry   = 5
	ctrRefresh = 30
)

// identify looks up the container ci is. Any cgroup but the users' may be one (containerd's
// and the OCI runtimes' cgroups are named by whoever made them, "/default/web-1"), so each is
// asked again every ctrRetry scans while unnamed; the resolver answers from its index.
func (t *cgroupTracker) identify(ci *cgroupInfo, gen uint64) {
	if t.opt.Containers == nil || ci.Name == "" || ci.Name == "user" {
		return
	}
	ci.ctrWant = true
	ctr, ok := t.opt.Containers.Identify(ci.Name)
	if ctr != ci.ctr || ok != ci.ctrOK {
		ci.ctr, ci.ctrOK, ci.ctrKeyS = ctr, ok, ""
		if ok {
			ci.ctrKeyS = ctr.ID + "\x00" + ctr.Name + "\x00" + ctr.Image + "\x00" + ctr.Pod + "\x00" + ctr.Namespace
		}
	}
	ci.ctrTried = gen
}

// ctrKey is what the series of a cgroup or process are made with, beside its cgroup name.
func (ci *cgroupInfo) ctrKey() string {
	if ci == nil {
		return ""
	}
	return ci.ctrKeyS
}

// addContainerLabels labels l with the container ci is: container (its name), image (when
// known) and container_id (12 hex digits), and for a Kubernetes container pod and namespace
// (namespace alone: a containerd container's namespace). They are the runtime's strings,
// already cleaned; the cgroup label stays what the kernel says.
func addContainerLabels(l series.Labels, ci *cgroupInfo) {
	if ci == nil || !ci.ctrOK {
		return
	}
	l["container"], l["container_id"] = ci.ctr.Name, ci.ctr.ID
	if ci.ctr.Image != "" {
		l["image"] = ci.ctr.Image
	}
	if ci.ctr.Pod != "" {
		l["pod"] = ci.ctr.Pod
	}
	if ci.ctr.Namespace != "" {
		l["namespace"] = ci.ctr.Namespace
	}
}

// cgroupSeries are the cached Refs of one cgroup name.
type cgroupSeries struct {
	refs       [cgNum]*series.Ref
	refsFor    string // the ctrKey refs were made with
	cfsV2      bool   // the unified cpu.stat had CFS figures in the latest scan
	procs      int64
	pid        int                    // a process of it in this scan (its network namespace's interfaces)
	labelled   map[string]*series.Ref // per device and interface series, by labelledKey
	oomKill    uint64                 // the latest oom_kill read
	oomHave    bool                   // oomKill was read
	oomReadGen uint64                 // the scan that read it
	oomPending uint64                 // kills logged after that read (see oomkmsg.go)
	info       *cgroupInfo
	files      *cgFileTable // its files, kept open or known missing (cgroup_files.go)
	net        netState     // its network namespace (cgroup_res.go)
	ev         evWatch      // the watch on its memory.events (cgroup_events.go)
	dir        struct {     // whether a directory of it was there (dirThere)
		gen   uint64
		path  string
		there bool
	}
	scanmark.Mark // the latest scan that saw it
}

const (
	cgCPUUsage = iota
	cgCPUUser
	cgCPUSystem
	cgMemUsage
	cgMemAnon
	cgMemFile
	cgMemLimit
	cgMemWorkingSet
	cgCPUPeriods
	cgCPUThrottled
	cgCPUThrottledTime
	cgOOM
	cgOOMKill
	cgProcesses
	cgPids
	cgPidsLimit
	cgPSICPUSome
	cgPSICPUFull
	cgPSIMemSome
	cgPSIMemFull
	cgPSIIOSome
	cgPSIIOFull
	cgNum
)

var cgroupMetrics = [cgNum]struct {
	name string
	kind series.Kind
}{
	cgCPUUsage:  {"cgroup.cpu.usage_ms", series.Counter},
	cgCPUUser:   {"cgroup.cpu.user_ms", series.Counter},
	cgCPUSystem: {"cgroup.cpu.system_ms", series.Counter},
	cgMemUsage:  {"cgroup.memory.usage", series.Level},
	cgMemAnon:   {"cgroup.memory.anon", series.Level},
	cgMemFile:   {"cgroup.memory.file", series.Level},
	cgMemLimit:  {"cgroup.memory.limit", series.Level},
	// usage less inactive file pages: what the kernel cannot reclaim at once (cAdvisor's
	// working set, what kubelet evicts by).
	cgMemWorkingSet: {"cgroup.memory.working_set", series.Level},
	// CFS bandwidth control (a CPU quota): periods elapsed, periods throttled, time throttled.
	cgCPUPeriods:       {"cgroup.cpu.periods", series.Counter},
	cgCPUThrottled:     {"cgroup.cpu.throttled_periods", series.Counter},
	cgCPUThrottledTime: {"cgroup.cpu.throttled_ms", series.Counter},
	// Times the cgroup hit its memory limit (v2 oom) and processes the OOM killer killed in it.
	cgOOM:       {"cgroup.memory.oom", series.Counter},
	cgOOMKill:   {"cgroup.memory.oom_kill", series.Counter},
	cgProcesses: {"cgroup.processes", series.Level},
	// Tasks (threads) in the cgroup and its limit (pids.current, pids.max).
	cgPids:      {"cgroup.pids", series.Level},
	cgPidsLimit: {"cgroup.pids.limit", series.Level},
	// Pressure stall information (v2): time some or all of its tasks waited for a resource.
	cgPSICPUSome: {"cgroup.pressure.cpu.some_ms", series.Counter},
	cgPSICPUFull: {"cgroup.pressure.cpu.full_ms", series.Counter},
	cgPSIMemSome: {"cgroup.pressure.memory.some_ms", series.Counter},
	cgPSIMemFull: {"cgroup.pressure.memory.full_ms", series.Counter},
	cgPSIIOSome:  {"cgroup.pressure.io.some_ms", series.Counter},
	cgPSIIOFull:  {"cgroup.pressure.io.full_ms", series.Counter},
}

// cgroupTracker interns /proc/PID/cgroup contents and emits per-cgroup series. It belongs to
// the Processes collector and shares its goroutine.
type cgroupTracker struct {
	opt      Options
	root     string // Sys/fs/cgroup
	unified  string // mount point of the v2 hierarchy, "" when none
	detected bool

	byContent    map[string]*cgroupInfo
	byName       map[string]*cgroupSeries
	lines        []cgroupLine
	path         []byte
	buf          []byte
	kvs          []kv
	io           []ioDev
	netdevs      []kfile.NetDev
	devNames     map[string]string // "major:minor" → block device name, from Sys/dev/block
	hostNetNS    string            // the network namespace of Proc/1 ("net:[4026531840]")
	kmsgTried    bool              // Options.Kmsg was opened (see oomkmsg.go)
	kmsgFD       int               // -1: none
	kmsgBuf      []byte
	tombs        map[string]*tomb  // gone containers' OOM kills, by cgroup name
	gen          uint64            // the scan collect is in
	kept         int               // cgroup files open (Options.CgroupKeepOpen)
	netCands     []netCand         // this scan's containers with a network namespace of their own
	netOwner     map[string]string // network namespace → the cgroup its series went to last scan
	netOwnerNext map[string]string // the next scan's, reused
	key          []byte            // putLabelled's
	hostTried    uint64            // the scan that last failed to read the host's network namespace
	ino          int               // inotify instance watching memory.events files; -1: none
	inoTried     bool
	inoWD        map[int32]*cgroupSeries
	inoBuf       []byte
}

func newCgroupTracker(opt Options) *cgroupTracker {
	return &cgroupTracker{
		opt:       opt,
		root:      filepath.Join(opt.Sys, "fs", "cgroup"),
		byContent: map[string]*cgroupInfo{},
		byName:    map[string]*cgroupSeries{},
		kmsgFD:    -1,
		ino:       -1,
		tombs:     map[string]*tomb{},
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (t *cgroupTracker) detect() {
	if t.detected {
		return
	}
	t.detected = true
	switch {
	case exists(filepath.Join(t.root, "cgroup.controllers")):
		t.unified = t.root
	case exists(filepath.Join(t.root, "unified", "cgroup.controllers")):
		t.unified = filepath.Join(t.root, "unified")
	}
}

// intern returns the info for the content of a /proc/PID/cgroup file, parsing it only when it
// was not seen before.
func (t *cgroupTracker) intern(content []byte, gen uint64) (*cgroupInfo, error) {
	if ci, ok := t.byContent[string(content)]; ok {
		ci.See(gen)
		return ci, nil
	}
	t.detect()
	var err error
	t.lines, err = parseCgroupFile(content, t.lines[:0])
	if err != nil {
		return nil, err
	}
	ci := &cgroupInfo{}
	ci.See(gen)
	if i := chooseCgroup(t.lines); i >= 0 {
		ci.Name, _ = cgroupName(t.lines[i].Path)
	}
	if ci.Name != "" {
		for _, l := range t.lines {
			name, dir := cgroupName(l.Path)
			if name != ci.Name {
				continue
			}
			switch {
			case string(l.ID) == "0" && len(l.Controllers) == 0:
				if t.unified != "" {
					ci.V2Dir = filepath.Join(t.unified, dir)
				}
			case hasController(l.Controllers, "memory"):
				ci.MemDir = t.v1Dir(l.Controllers, "memory", dir)
			case hasController(l.Controllers, "cpuacct"):
				ci.CPUAcctDir = t.v1Dir(l.Controllers, "cpuacct", dir)
			}
			if len(l.Controllers) > 0 && hasController(l.Controllers, "cpu") {
				ci.CPUDir = t.v1Dir(l.Controllers, "cpu", dir)
			}
			if len(l.Controllers) > 0 && hasController(l.Controllers, "blkio") {
				ci.BlkioDir = t.v1Dir(l.Controllers, "blkio", dir)
			}
			if len(l.Controllers) > 0 && hasController(l.Controllers, "pids") {
				ci.PidsDir = t.v1Dir(l.Controllers, "pids", dir)
			}
		}
	}
	t.identify(ci, gen)
	t.byContent[string(content)] = ci
	return ci, nil
}

// v1Dir finds where the v1 hierarchy with these controllers is mounted: Sys/fs/cgroup/cpu,cpuacct
// or, failing that, Sys/fs/cgroup/cpuacct.
func (t *cgroupTracker) v1Dir(controllers []byte, want, dir string) string {
	for _, m := range []string{string(controllers), want} {
		if p := filepath.Join(t.root, m); exists(p) {
			return filepath.Join(p, dir)
		}
	}
	return ""
}

// count records that a process (pid) of this scan is in ci.
func (t *cgroupTracker) count(ci *cgroupInfo, gen uint64, pid int) {
	if ci == nil || ci.Name == "" {
		return
	}
	if ci.ctrWant && (!ci.ctrOK && gen-ci.ctrTried >= ctrRetry || gen-ci.ctrTried >= ctrRefresh) {
		t.identify(ci, gen)
	}
	cs := t.byName[ci.Name]
	if cs == nil {
		cs = &cgroupSeries{}
		t.byName[ci.Name] = cs
	}
	if !cs.Seen(gen) {
		cs.See(gen)
		cs.procs, cs.info, cs.pid = 0, nil, pid
	}
	cs.procs++
	// Prefer the info that can measure the most.
	if cs.info == nil || score(ci) > score(cs.info) {
		cs.info = ci
	}
}

func score(ci *cgroupInfo) int {
	n := 0
	for _, d := range []string{ci.V2Dir, ci.MemDir, ci.CPUAcctDir} {
		if d != "" {
			n++
		}
	}
	return n
}

// collect emits the series of every cgroup counted in this scan and forgets those gone.
func (t *cgroupTracker) collect(sink series.Sink, gen uint64) {
	t.gen = gen
	t.openKmsg()
	scanmark.Sweep(t.byName, gen, func(name string, cs *cgroupSeries) {
		t.bury(name, cs, gen)
		t.forgetFiles(cs)
		t.closeNet(&cs.net)
	})
	t.netCands = t.netCands[:0]
	t.drainEvents()
	for name, cs := range t.byName {
		delete(t.tombs, name) // a cgroup of that name again: its own files count
		if cs.info.ctrOK {
			t.drainKmsg(gen) // the kills logged before this container's files are read
		}
		if k := cs.info.ctrKey(); k != cs.refsFor {
			cs.refs, cs.refsFor, cs.labelled = [cgNum]*series.Ref{}, k, nil
		}
		t.put(sink, name, cs, cgProcesses, uint64(cs.procs))
		ci := cs.info
		var haveCPU, haveMem bool
		cs.cfsV2 = false
		if ci.V2Dir != "" {
			haveCPU, haveMem = t.readV2(sink, name, cs, ci.V2Dir)
		}
		// On hybrid machines the unified hierarchy may measure CPU but not memory; the v1
		// controllers fill in what it lacks.
		if ci.MemDir != "" && !haveMem {
			t.readV1Memory(sink, name, cs, ci.MemDir)
		}
		if ci.CPUAcctDir != "" && !haveCPU {
			t.readV1CPU(sink, name, cs, ci.CPUAcctDir)
		}
		// On hybrid machines the unified cpu.stat has usage but no CFS figures: the v1 cpu
		// controller's cpu.stat has them (throttled_time in ns).
		if ci.CPUDir != "" && !cs.cfsV2 && t.readKeyed(sink, cs, fV1CPUStat, ci.CPUDir) {
			t.putThrottling(sink, name, cs, 1e6)
		}
		t.readResources(sink, name, cs)
	}
	t.readNetworks(sink)
	t.drainKmsg(gen)
	t.putTombs(sink, gen)
	scanmark.Sweep(t.byContent, gen, nil)
}

func (t *cgroupTracker) put(sink series.Sink, name string, cs *cgroupSeries, m int, v uint64) {
	r := cs.refs[m]
	if r == nil {
		l := series.Labels{"metric": cgroupMetrics[m].name, "cgroup": name}
		addContainerLabels(l, cs.info)
		r = sink.Series(l, cgroupMetrics[m].kind)
		cs.refs[m] = r
	}
	sink.Put(r, v)
}

// readValue reads a one-value file: its value when it has one, and whether the file was there.
// A limit file is read every cgRareEvery scans, its latest read answered between.
func (t *cgroupTracker) readValue(sink series.Sink, cs *cgroupSeries, id int, dir string) (v uint64, ok, there bool) {
	rare := cgFiles[id].rare
	if rare && cs.files != nil {
		if f := &cs.files[id]; f.dir == dir && f.next > t.gen {
			return f.v, f.ok, f.there
		}
	}
	b, there := t.read(sink, cs, id, dir)
	if there {
		var err error
		if v, ok, err = parseSingleValue(b); err != nil {
			sink.Problem(dir+"/"+cgFiles[id].name, err.Error())
			v, ok, there = 0, false, false
		}
	}
	if f := &cs.files[id]; rare && f.dir == dir {
		f.v, f.ok, f.there, f.next = v, ok, there, t.gen+cgRareEvery
	}
	return v, ok, there
}

// readSingle reads a one-value file into series m; it reports whether the file was there.
func (t *cgroupTracker) readSingle(sink series.Sink, name string, cs *cgroupSeries, id int, dir string, m int) bool {
	v, ok, there := t.readValue(sink, cs, id, dir)
	if ok && !(m == cgMemLimit && v >= 1<<62) { // v1 says "no limit" with a huge number
		t.put(sink, name, cs, m, v)
	}
	return there
}

func (t *cgroupTracker) readKeyed(sink series.Sink, cs *cgroupSeries, id int, dir string) bool {
	b, ok := t.read(sink, cs, id, dir)
	if !ok {
		return false
	}
	var err error
	if t.kvs, err = parseFlatKeyed(b, t.kvs[:0]); err != nil {
		sink.Problem(dir+"/"+cgFiles[id].name, err.Error())
		return false
	}
	return true
}

// readV2 reads a unified-hierarchy cgroup and reports whether it had CPU and memory files.
func (t *cgroupTracker) readV2(sink series.Sink, name string, cs *cgroupSeries, dir string) (haveCPU, haveMem bool) {
	if haveCPU = t.readKeyed(sink, cs, fCPUStat, dir); haveCPU {
		for _, e := range [...]struct {
			key string
			m   int
		}{{"usage_usec", cgCPUUsage}, {"user_usec", cgCPUUser}, {"system_usec", cgCPUSystem}} {
			if v, ok := lookup(t.kvs, e.key); ok {
				t.put(sink, name, cs, e.m, v/1000)
			}
		}
		cs.cfsV2 = t.putThrottling(sink, name, cs, 1000)
	}
	usage, haveUsage, haveMem := t.readValue(sink, cs, fMemCurrent, dir)
	if !haveMem {
		return haveCPU, false
	}
	if haveUsage {
		t.put(sink, name, cs, cgMemUsage, usage)
	}
	t.readSingle(sink, name, cs, fMemMax, dir, cgMemLimit)
	ev := &cs.ev
	if !(ev.on && !ev.dirty && ev.have && cs.files[fMemEvents].dir == dir) { // see cgroup_events.go
		ev.dirty, ev.have = false, false
		if t.readKeyed(sink, cs, fMemEvents, dir) {
			ev.oom, ev.hasOOM = lookup(t.kvs, "oom")
			ev.kill, ev.hasKill = lookup(t.kvs, "oom_kill")
			ev.have = true
		}
	}
	if ev.have {
		if ev.hasOOM {
			t.put(sink, name, cs, cgOOM, ev.oom)
		}
		if ev.hasKill {
			t.put(sink, name, cs, cgOOMKill, ev.kill)
			t.readOOMKill(cs, ev.kill)
		}
	}
	if t.readKeyed(sink, cs, fMemStat, dir) {
		if v, ok := lookup(t.kvs, "inactive_file"); ok && haveUsage {
			t.put(sink, name, cs, cgMemWorkingSet, usage-min(v, usage))
		}
		if v, ok := lookup(t.kvs, "anon"); ok {
			t.put(sink, name, cs, cgMemAnon, v)
		}
		if v, ok := lookup(t.kvs, "file"); ok {
			t.put(sink, name, cs, cgMemFile, v)
		}
	}
	return haveCPU, true
}

// readOOMKill notes the oom_kill a scan read of cs: the kills logged before are in it.
func (t *cgroupTracker) readOOMKill(cs *cgroupSeries, v uint64) {
	cs.oomKill, cs.oomHave, cs.oomReadGen, cs.oomPending = v, true, t.gen, 0
}

// putThrottling puts the CFS figures of the cpu.stat in t.kvs: nr_periods, nr_throttled and
// throttled_usec (v2) or throttled_time (v1, ns), whose unit per millisecond is perMs. A
// cgroup without a quota has zero periods: no series. It reports whether it put any.
func (t *cgroupTracker) putThrottling(sink series.Sink, name string, cs *cgroupSeries, perMs uint64) bool {
	periods, ok := lookup(t.kvs, "nr_periods")
	if !ok || periods == 0 {
		return false
	}
	t.put(sink, name, cs, cgCPUPeriods, periods)
	if v, ok := lookup(t.kvs, "nr_throttled"); ok {
		t.put(sink, name, cs, cgCPUThrottled, v)
	}
	key := "throttled_usec"
	if perMs == 1e6 {
		key = "throttled_time"
	}
	if v, ok := lookup(t.kvs, key); ok {
		t.put(sink, name, cs, cgCPUThrottledTime, v/perMs)
	}
	return true
}

func (t *cgroupTracker) readV1Memory(sink series.Sink, name string, cs *cgroupSeries, dir string) {
	usage, haveUsage, _ := t.readValue(sink, cs, fV1MemUsage, dir)
	if haveUsage {
		t.put(sink, name, cs, cgMemUsage, usage)
	}
	t.readSingle(sink, name, cs, fV1MemLimit, dir, cgMemLimit)
	if t.readKeyed(sink, cs, fV1OOMControl, dir) { // oom_kill since Linux 4.13
		if v, ok := lookup(t.kvs, "oom_kill"); ok {
			t.put(sink, name, cs, cgOOMKill, v)
			t.readOOMKill(cs, v)
		}
	}
	if t.readKeyed(sink, cs, fV1MemStat, dir) {
		if v, ok := lookup(t.kvs, "total_inactive_file"); ok && haveUsage {
			t.put(sink, name, cs, cgMemWorkingSet, usage-min(v, usage))
		}
		// total_* include descendant cgroups, as v2's memory.stat does.
		if v, ok := lookup(t.kvs, "total_rss"); ok {
			t.put(sink, name, cs, cgMemAnon, v)
		} else if v, ok := lookup(t.kvs, "rss"); ok {
			t.put(sink, name, cs, cgMemAnon, v)
		}
		if v, ok := lookup(t.kvs, "total_cache"); ok {
			t.put(sink, name, cs, cgMemFile, v)
		} else if v, ok := lookup(t.kvs, "cache"); ok {
			t.put(sink, name, cs, cgMemFile, v)
		}
	}
}

func (t *cgroupTracker) readV1CPU(sink series.Sink, name string, cs *cgroupSeries, dir string) {
	if b, ok := t.read(sink, cs, fV1CPUAcctUsage, dir); ok {
		if v, ok, err := parseSingleValue(b); err != nil {
			sink.Problem(dir+"/cpuacct.usage", err.Error())
		} else if ok {
			t.put(sink, name, cs, cgCPUUsage, v/1e6) // ns
		}
	}
	if t.readKeyed(sink, cs, fV1CPUAcctStat, dir) {
		if v, ok := lookup(t.kvs, "user"); ok {
			t.put(sink, name, cs, cgCPUUser, t.opt.ticksToMs(v))
		}
		if v, ok := lookup(t.kvs, "system"); ok {
			t.put(sink, name, cs, cgCPUSystem, t.opt.ticksToMs(v))
		}
	}
}
