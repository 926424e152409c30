package sysscan

// /sys/class/net: network interface attributes (System).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// How a netclass attribute file is read.
const (
	ncInt   = iota // decimal integer
	ncHex          // 0x-prefixed hexadecimal
	ncOper         // operstate: 1 for "up", else 0
	ncSpeed        // Mbit/s to bytes/s
)

// ncFiles are the /sys/class/net/<interface>/ attributes read into series. rare ones are read
// every rareEvery scans, the others every scan. ncOperstate must stay first: its text also
// feeds net.interface.info.
var ncFiles = [...]struct {
	file, metric string
	kind         series.Kind
	parse        int
	rare         bool
}{
	{"operstate", "net.interface.up", series.Level, ncOper, false},
	{"carrier", "net.interface.carrier", series.Level, ncInt, false},
	{"carrier_changes", "net.interface.carrier_changes", series.Counter, ncInt, false},
	{"carrier_up_count", "net.interface.carrier_up_changes", series.Counter, ncInt, false},
	{"carrier_down_count", "net.interface.carrier_down_changes", series.Counter, ncInt, false},
	{"flags", "net.interface.flags", series.Level, ncHex, false},
	{"statistics/rx_nohandler", "net.interface.rx.nohandler", series.Counter, ncInt, false},
	{"mtu", "net.interface.mtu", series.Level, ncInt, true},
	{"speed", "net.interface.speed", series.Level, ncSpeed, true},
	{"tx_queue_len", "net.interface.tx_queue_len", series.Level, ncInt, true},
	{"dormant", "net.interface.dormant", series.Level, ncInt, true},
	{"type", "net.interface.protocol", series.Level, ncInt, true},
	{"ifindex", "net.interface.iface_id", series.Level, ncInt, true},
	{"iflink", "net.interface.iface_link", series.Level, ncInt, true},
	{"link_mode", "net.interface.iface_link_mode", series.Level, ncInt, true},
	{"addr_assign_type", "net.interface.address_assign_type", series.Level, ncInt, true},
	{"name_assign_type", "net.interface.name_assign_type", series.Level, ncInt, true},
	{"dev_id", "net.interface.device_id", series.Level, ncHex, true},
	{"netdev_group", "net.interface.net_dev_group", series.Level, ncInt, true},
}

// ncKept is how many of ncFiles (the first, read every scan) are kept open per interface and
// re-read with one pread(2) (sysfs regenerates an attribute read from offset 0), which costs a
// third of open, read and close; ncKeepMax bounds the descriptors so kept, for all interfaces
// (73 interfaces; those beyond are read with open, read and close).
const (
	ncKept    = 7
	ncKeepMax = 512
)

// ncInfoFiles are the text attributes that label net.interface.info, read every rareEvery
// scans.
var ncInfoFiles = [...]string{"address", "broadcast", "duplex", "ifalias"}

// netClass reads /sys/class/net for System. It keeps a directory descriptor per interface
// between scans; only System's scan goroutine uses it.
type netClass struct {
	classfd int
	open    bool
	dents   []byte
	buf     []byte
	names   [len(ncFiles)][]byte // NUL-terminated file names
	info    [len(ncInfoFiles)][]byte
	ifs     map[string]*ncIface
	kept    int // descriptors held by the interfaces' kept files
}

type ncIface struct {
	name          string
	fd            int // the interface's directory; -1 when closed
	keep          bool
	kept          [ncKept]kfile.Kept
	scanmark.Mark // the latest scan that saw it
	refs          [len(ncFiles)]*series.Ref
	vals          [len(ncFiles)]int64
	have          [len(ncFiles)]bool
	// refused marks the files the kernel refused to read at the last try (carrier of a link
	// that is down): they are tried again when operstate changes and every rareEvery scans.
	refused [len(ncFiles)]bool
	oper    string
	infos   [len(ncInfoFiles)]string
	info    stateSeries
}

func newNetClass() netClass {
	n := netClass{dents: make([]byte, 8<<10), buf: make([]byte, 0, 4096), ifs: map[string]*ncIface{}}
	for i, f := range ncFiles {
		n.names[i] = append([]byte(f.file), 0)
	}
	for i, f := range ncInfoFiles {
		n.info[i] = append([]byte(f), 0)
	}
	return n
}

func (n *netClass) close() {
	if n.open {
		unix.Close(n.classfd)
		n.open = false
	}
	for k, f := range n.ifs {
		n.forget(f)
		delete(n.ifs, k)
	}
}

// forget closes an interface's descriptors and gives back its share of the kept budget.
func (n *netClass) forget(f *ncIface) {
	f.closeDir()
	if f.keep {
		n.kept -= ncKept
		f.keep = false
	}
}

func (f *ncIface) closeDir() {
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
	for i := range f.kept {
		f.kept[i].Close()
	}
}

// collect lists sysDir/class/net and reads each interface's attributes.
func (n *netClass) collect(sysDir string, sink series.Sink, gen uint64, rare bool) {
	dir := func() string { return filepath.Join(sysDir, "class/net") } // for errors only: no allocation per scan
	if !n.open {
		fd, err := kfile.OpenDir(dir())
		if err != nil {
			sink.Problem(dir(), err.Error())
			return
		}
		n.classfd, n.open = fd, true
	}
	if _, err := unix.Seek(n.classfd, 0, 0); err != nil {
		sink.Problem(dir(), "rewind: "+err.Error())
		n.close()
		return
	}
	for {
		c, err := unix.Getdents(n.classfd, n.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			sink.Problem(dir(), "list: "+err.Error())
			n.close()
			return
		}
		if c <= 0 {
			break
		}
		eachDirent(n.dents[:c], func(name []byte, typ byte) {
			if typ != unix.DT_LNK && typ != unix.DT_DIR {
				return // bonding_masters and other files
			}
			if string(name) == "." || string(name) == ".." {
				return
			}
			f := n.ifs[string(name)]
			if f == nil {
				f = &ncIface{name: kfile.ValidString(name), fd: -1}
				if n.kept+ncKept <= ncKeepMax {
					f.keep = true
					n.kept += ncKept
				}
				n.ifs[string(name)] = f
				rare := true
				n.readIface(f, name, sink, rare)
			} else {
				n.readIface(f, name, sink, rare)
			}
			f.See(gen)
		})
	}
	scanmark.Sweep(n.ifs, gen, func(_ string, f *ncIface) { n.forget(f) })
}

// eachDirent calls fn with the name and type of every entry of a getdents64 buffer.
func eachDirent(b []byte, fn func(name []byte, typ byte)) {
	// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return
		}
		name := b[nameOff:reclen]
		if i := kfile.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		fn(name, b[18])
		b = b[reclen:]
	}
}

// readIface reads one interface's attributes and writes its series. A file the kernel refuses
// (carrier of a link that is down, speed of a virtual link) leaves its series without a value.
func (n *netClass) readIface(f *ncIface, name []byte, sink series.Sink, rare bool) {
	if f.fd < 0 {
		path := append(append(n.buf[:0], name...), 0)
		fd, err := kfile.OpenAt(n.classfd, path)
		if err != nil {
			return // vanished between the listing and now
		}
		f.fd = fd
		rare = true
	}
	operChanged := false
	for i := range ncFiles {
		spec := &ncFiles[i]
		if spec.rare && !rare {
			if f.have[i] {
				n.put(f, i, sink)
			}
			continue
		}
		if f.refused[i] && !rare && !operChanged {
			continue
		}
		var b []byte
		var err error
		if i < ncKept && f.keep {
			b, err = f.kept[i].Read(f.fd, n.names[i], &n.buf, 4096, true)
		} else {
			b, err = kfile.ReadFileAt(f.fd, n.names[i], &n.buf, 4096)
		}
		f.have[i] = false
		f.refused[i] = err != nil
		if err != nil {
			if i == 0 {
				// the directory may belong to an interface that went away and came back
				// under the same name: open it again next scan
				f.closeDir()
				return
			}
			continue
		}
		var v int64
		switch spec.parse {
		case ncInt:
			v, err = kfile.ParseIntValue(b)
		case ncHex:
			var u uint64
			u, err = parseHexValue(b)
			v = int64(u)
		case ncOper:
			b = trimNL(b)
			if string(b) != f.oper {
				f.oper = kfile.ValidString(b)
				operChanged = true
			}
			if f.oper == "up" {
				v = 1
			}
		case ncSpeed:
			v, err = kfile.ParseIntValue(b)
			v *= 125000 // -1 (unknown) gives -125000, as node_exporter 1.5 reports it
		}
		if err != nil {
			continue
		}
		f.vals[i], f.have[i] = v, true
		n.put(f, i, sink)
	}
	if rare {
		for i := range ncInfoFiles {
			b, err := kfile.ReadFileAt(f.fd, n.info[i], &n.buf, 4096)
			v := ""
			if err == nil {
				v = kfile.ValidString(trimNL(b))
			}
			if v != f.infos[i] {
				f.infos[i] = v
				operChanged = true
			}
		}
	}
	if operChanged || f.info.ref == nil {
		l := series.Labels{"metric": "net.interface.info", "interface": f.name, "operstate": f.oper}
		for i, k := range ncInfoFiles {
			l[k] = f.infos[i]
		}
		f.info.set(sink, l, f.oper, time.Now().UnixMilli())
	}
	f.info.put(sink)
}

func (n *netClass) put(f *ncIface, i int, sink series.Sink) {
	r := f.refs[i]
	if r == nil {
		r = sink.Series(series.Labels{"metric": ncFiles[i].metric, "interface": f.name}, ncFiles[i].kind)
		f.refs[i] = r
	}
	sink.Put(r, uint64(f.vals[i]))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// parseHexValue parses a sysfs attribute holding one "0x"-prefixed hexadecimal number (flags,
// dev_id).
func parseHexValue(b []byte) (uint64, error) {
	b = bytes.TrimSpace(b)
	if len(b) < 3 || b[0] != '0' || (b[1] != 'x' && b[1] != 'X') {
		return 0, fmt.Errorf("parse hex value: %w", kfile.ErrSyntax)
	}
	v, err := kfile.ParseHex(b[2:])
	if err != nil {
		return 0, fmt.Errorf("parse hex value: %w", err)
	}
	return v, nil
}
