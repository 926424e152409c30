package sysscan

import (
	"os"
	"path/filepath"
)

// Options says where the collectors find procfs and sysfs. The zero value means the host's own
// /proc and /sys. Options are copied by the constructors and never modified.
type Options struct {
	// Proc is the procfs mount point, "/proc" when empty. An agent running in a container with
	// the host's procfs mounted elsewhere sets it (e.g. "/host/proc").
	Proc string
	// Sys is the sysfs mount point, "/sys" when empty.
	Sys string
	// Udev is udev's run directory, whose data/b<major>:<minor> files name disks
	// (disk.info); "/run/udev" when empty.
	Udev string
	// ClockTick is USER_HZ, the unit of the tick counters in /proc/stat and /proc/PID/stat;
	// 100 when zero (the value on every Linux architecture Go supports).
	ClockTick int
	// PageSize is the size of a memory page in bytes; os.Getpagesize() when zero.
	PageSize int
	// TCPEvery is how often (in scans) Machine counts the TCP sockets, the scans between
	// emitting the last counts again (see tcpEvery); 5 when zero, every scan when 1.
	TCPEvery int
	// Interrupts makes System read /proc/interrupts at every scan: interrupts{type,cpu,info,
	// devices}, a counter per interrupt and CPU (node_interrupts_total). Off by default, as
	// node_exporter's interrupts collector: it is interrupts × CPUs series (tens of thousands
	// on a large server).
	Interrupts bool
	// TCPStat makes Machine also emit tcp.connection_states{state}, node_exporter's tcpstat
	// collector (node_tcp_connection_states): the sockets of each state that has any, and the
	// pseudo-states rx_queued_bytes and tx_queued_bytes (see tcpScan.emitStat). Off by default,
	// as node_exporter's collector; counted with the other TCP series (TCPEvery).
	TCPStat bool
}

func (o Options) withDefaults() Options {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Sys == "" {
		o.Sys = "/sys"
	}
	if o.Udev == "" {
		o.Udev = "/run/udev"
	}
	if o.ClockTick <= 0 {
		o.ClockTick = 100
	}
	if o.PageSize <= 0 {
		o.PageSize = os.Getpagesize()
	}
	if o.TCPEvery <= 0 {
		o.TCPEvery = tcpEvery
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
