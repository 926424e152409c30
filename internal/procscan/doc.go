// Package procscan is the per-process scan: it reads every /proc/PID (stat, schedstat, status,
// io, cgroup, cmdline, environ) and the cgroups those processes are in into a series.Sink, and
// keeps the latest process table for the API and package apps.
//
// Files, by what they do:
//
//   - processes.go: Processes, the collector; the scan of one pid (its stat line), the detail
//     reads planned from it, and the process table published after each scan.
//   - idle.go: telling from schedstat whether a process ran since the previous scan, so that
//     the stat line of one that did not is reused instead of read.
//   - taskiter.go: the same counters for every process from one pass of the BPF task iterator
//     (package taskiter), when the kernel allows.
//   - procevents.go: the kernel's process events connector, so that /proc is listed only every
//     listEvery scans instead of every scan.
//   - shed.go: the time budget of a scan, the detail reads shed when it runs late, and the
//     scan's own counters (ScanStats).
//   - cgroups.go, cgroup_name.go: what "the cgroup" of a process is when cgroup v1 and v2
//     disagree, and the per-cgroup series read from each cgroup's files.
//   - cgroup_files.go, cgroup_events.go: how those files are read (kept open within
//     Options.CgroupKeepOpen, missing ones and limits not read at every scan, memory.events
//     when the kernel notifies it).
//   - cgroup_res.go: I/O, tasks, pressure and a container's network (a pod's once).
//   - parse_proc.go, parse_cgroup.go: the pure parsers of those files, tested on literal
//     strings, testdata fixtures and fuzz targets.
//
// Reading and the byte-level helpers are package kfile's, shared with package sysscan (the
// machine-wide files). The scan runs every 2 s, so the steady state is kept cheap: files are
// kept open between scans and re-read with one pread(2) (Options.KeepOpen bounds how many;
// Close releases them). Every series.Ref is registered once and cached while the process or
// cgroup lives, and dropped when it goes. A process's cmdline and environ are read once per
// (pid, start time, command name); its status and cgroup files on its first scan and then every
// tenth; its io file at every scan after it used CPU, else every fifth (processes.go says why).
// /proc is listed with getdents(2) into a reused buffer only every 30 scans when the process
// events connector tells the scan of new processes (root, initial namespaces), else at every
// scan.
//
// Processes is used by one scan goroutine at a time (series.Collector's contract); only Table,
// AppendTable, Len and Stats may be called from other goroutines.
//
// The series names and labels emitted are listed in docs/metrics.md.
package procscan
