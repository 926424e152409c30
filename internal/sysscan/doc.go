// Package sysscan reads the machine, its processes and their cgroups from procfs and sysfs into a
// series.Sink: one collector per file behind series.Collector, in the style of node_exporter.
//
// Reading is kept apart from parsing: every file format has a byte-level parser (parse*.go) that
// works on a []byte and is tested on literal strings, testdata fixtures and fuzz targets; the
// collectors (machine.go, processes.go, cgroups.go) only open files, call the parsers and turn the
// result into series.
//
// The scan runs every 2 s, so the steady state is kept cheap: files are opened with openat(2)
// relative to a directory descriptor and read into buffers that live as long as the collector;
// the /proc directory is listed with getdents(2) into a reused buffer; every series.Ref is
// registered once and cached while the thing it measures (a pid, an interface, a disk, a port, a
// cgroup) lives, and dropped when it goes, so memory does not grow with churn.
//
// Every collector is used by one scan goroutine at a time (series.Collector's contract); only
// Processes.Table may be called from other goroutines.
//
// The series names and labels emitted are listed in docs/metrics.md.
package sysscan
