// Package sysscan reads the machine's kernel files (procfs, sysfs and a few others: CPU, memory,
// disks, network, pressure, sockets, sensors, mounts) into a series.Sink, in the style of
// node_exporter. The per-process scan (every /proc/PID and the processes' cgroups) is package
// procscan; both read files through package kfile.
//
// # Layout: one file per kernel source
//
// Each source has one file, named after the kernel file it reads with "/" turned into "_"
// (proc_meminfo.go is /proc/meminfo, sys_class_net.go is /sys/class/net, run_udev_data.go is
// /run/udev/data), which holds the source's state, its pure parser and the function that puts
// its series; its first comment names the file and the collector that reads it. The others:
//
//   - sources.go: procSources, the one table of the procfs files read whole at every scan,
//     and collectProc, the one loop that reads them for Machine and System alike (kept file,
//     pread, parse, put; a failure is reported with Sink.Problem and the other sources are
//     still read; optional sources absent from this kernel are looked for every rareEvery scans).
//   - machine.go, system.go: the two collectors; each scan runs collectProc, then the sources
//     read another way: the TCP sockets (proc_net_tcp.go, netlink_inet_diag.go), UDP queues
//     (proc_net_udp.go), adjtimex(2) (adjtimex.go), and the sysfs, udev and /etc sources, most
//     of them every rareEvery scans.
//   - proc_1_mountinfo.go: Filesystems, the third collector: statfs(2) on every mount from one
//     goroutine per mount, so that a hung mount costs a scan at most FSOptions.Timeout; it
//     parses mountinfo again only when poll(2) says the mount table changed.
//   - options.go: Options.
//
// What a scan forgets: every map of per-name state (an interface, a disk, a port, a sensor)
// holds values embedding a scanmark.Mark, marked by the scan that saw them, and one
// scanmark.Sweep per map at the end of the scan drops the rest, so memory does not grow with
// churn.
//
// # Cost
//
// The scan runs every 2 s, so the steady state is kept cheap. Its cost is almost all the
// kernel's (generating /proc files), so the collectors keep files open between scans and re-read
// them with one pread(2) from offset 0, which regenerates the content: one system call per file
// instead of open, read, read and close. Other files are opened with openat(2) relative to a
// directory descriptor, and everything is read into buffers that live as long as the collector.
// Every series.Ref is registered once and cached while the thing it measures lives.
//
// The TCP sockets are the exception: each read of /proc/net/tcp or tcp6 walks the kernel's
// whole connection hash table (about 1 ms each on a machine with 24 GB of memory, even with no
// sockets), so for the host's own /proc they are counted from one netlink inet_diag dump, which
// walks it once for both families.
//
// Parsers work on a []byte and are tested on literal strings, testdata fixtures and fuzz
// targets (fuzz_test.go, fuzz_system_test.go). Every collector is used by one scan goroutine at
// a time (series.Collector's contract).
//
// The series names and labels emitted are listed in docs/metrics.md.
package sysscan
