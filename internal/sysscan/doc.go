// Package sysscan reads the machine's kernel files (procfs and sysfs: CPU, memory, disks,
// network, pressure, sockets, mounts, sensors) into a series.Sink, in the style of
// node_exporter. The per-process scan (every /proc/PID and the processes' cgroups) is package
// procscan; both read files through package kfile.
//
// Reading is kept apart from parsing: every file format has a byte-level parser (parse*.go) that
// works on a []byte and is tested on literal strings, testdata fixtures and fuzz targets; the
// collectors (machine.go, system.go, filesystem.go) only open files, call the parsers and turn
// the result into series.
//
// The scan runs every 2 s, so the steady state is kept cheap. Its cost is almost all the
// kernel's (generating /proc files), so the collectors keep files open between scans and re-read
// them with one pread(2) from offset 0, which regenerates the content: one system call per file
// instead of open, read, read and close. Other files are opened with openat(2) relative to a
// directory descriptor, and everything is read into buffers that live as long as the collector.
// Every series.Ref is registered once and cached while the thing it measures (an interface, a
// disk, a port) lives, and dropped when it goes, so memory does not grow with churn.
//
// The TCP sockets are the exception: each read of /proc/net/tcp or tcp6 walks the kernel's
// whole connection hash table (about 1 ms each on a machine with 24 GB of memory, even with no
// sockets), so for the host's own /proc they are counted from one netlink inet_diag dump, which
// walks it once for both families (tcp.go).
//
// Every collector is used by one scan goroutine at a time (series.Collector's contract).
//
// System (system.go, netclass.go, system_extra.go) reads the kernel's other machine-wide files
// (vmstat, pressure, sockstat, snmp6, conntrack, softnet, mdstat, /sys/class/net, adjtimex) the
// same way; Filesystems (filesystem.go) calls statfs(2) on every mount from one goroutine per
// mount, so that a hung mount costs a scan at most FSOptions.Timeout, and parses mountinfo again
// only when poll(2) says the mount table changed.
//
// The series names and labels emitted are listed in docs/metrics.md.
package sysscan
