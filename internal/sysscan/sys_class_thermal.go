package sysscan

// /sys/class/thermal: thermal zones and cooling devices (System).

import (
	"bytes"
	"math"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// thermalEvery is how often (in scans) /sys/class/thermal is read: a zone's temperature may
// be computed by ACPI firmware, which can take milliseconds; the scans between write the last
// values again.
const thermalEvery = 5

// thermal reads /sys/class/thermal for System: thermal zones' temperatures and cooling
// devices' states. It keeps the class directory open; only System's scan goroutine uses it.
type thermal struct {
	fd      int
	open    bool
	missing bool // the directory does not exist: looked for again every rareEvery scans
	dents   []byte
	buf     []byte
	path    []byte
	devs    map[string]*thermalDev
}

type thermalDev struct {
	cooling       bool
	label         string // zone or cooling device number
	typ           string
	refs          [2]*series.Ref // zone: temp; cooling: cur_state, max_state
	vals          [2]uint64
	have          [2]bool
	scanmark.Mark // the latest scan that saw it
}

func newThermal() thermal {
	return thermal{dents: make([]byte, 8<<10), buf: make([]byte, 0, 256), devs: map[string]*thermalDev{}}
}

func (th *thermal) close() {
	if th.open {
		unix.Close(th.fd)
		th.open = false
	}
}

// collect reads the class every thermalEvery scans and writes the last values at every scan.
func (th *thermal) collect(sysDir string, sink series.Sink, gen uint64, rare bool) {
	if (gen-1)%thermalEvery == 0 && (!th.missing || rare) {
		th.read(sysDir, sink, gen)
	}
	for _, d := range th.devs {
		for i, r := range d.refs {
			if d.have[i] && r != nil {
				sink.Put(r, d.vals[i])
			}
		}
	}
}

func (th *thermal) read(sysDir string, sink series.Sink, gen uint64) {
	dir := func() string { return filepath.Join(sysDir, "class/thermal") } // for errors only
	if !th.open {
		fd, err := unix.Open(dir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			th.missing = err == unix.ENOENT
			if !th.missing {
				sink.Problem(dir(), err.Error())
			}
			clear(th.devs)
			return
		}
		th.fd, th.open, th.missing = fd, true, false
	}
	if _, err := unix.Seek(th.fd, 0, 0); err != nil {
		sink.Problem(dir(), "rewind: "+err.Error())
		th.close()
		return
	}
	for {
		n, err := unix.Getdents(th.fd, th.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			sink.Problem(dir(), "list: "+err.Error())
			th.close()
			return
		}
		if n <= 0 {
			break
		}
		eachDirent(th.dents[:n], func(name []byte, _ byte) { th.readDev(name, sink, gen) })
	}
	scanmark.Sweep(th.devs, gen, nil)
}

// readDev reads one thermal_zone<N> or cooling_device<N> entry.
func (th *thermal) readDev(name []byte, sink series.Sink, gen uint64) {
	var num []byte
	var cooling bool
	switch {
	case bytes.HasPrefix(name, []byte("thermal_zone")):
		num = name[len("thermal_zone"):]
	case bytes.HasPrefix(name, []byte("cooling_device")):
		num, cooling = name[len("cooling_device"):], true
	default:
		return
	}
	if _, err := kfile.ParseUint(num); err != nil {
		return
	}
	d := th.devs[string(name)]
	if d == nil {
		b, err := th.readAttr(name, "type")
		if err != nil {
			return // vanished, or unreadable: tried again next time
		}
		d = &thermalDev{cooling: cooling, label: string(num), typ: kfile.ValidString(trimNL(b))}
		th.devs[string(name)] = d
	}
	d.See(gen)
	attrs := [2]string{"temp", ""}
	if cooling {
		attrs = [2]string{"cur_state", "max_state"}
	}
	for i, a := range attrs {
		d.have[i] = false
		if a == "" {
			continue
		}
		b, err := th.readAttr(name, a)
		if err != nil {
			continue
		}
		v, err := kfile.ParseIntValue(b)
		if err != nil {
			continue
		}
		if d.refs[i] == nil {
			if cooling {
				d.refs[i] = sink.Series(series.Labels{"metric": "thermal.cooling." + a, "name": d.label, "type": d.typ}, series.Level)
			} else {
				d.refs[i] = sink.Series(series.Labels{"metric": "thermal.zone.temp_c", "zone": d.label, "type": d.typ}, series.Float)
			}
		}
		if cooling {
			d.vals[i] = uint64(v)
		} else {
			d.vals[i] = math.Float64bits(float64(v) / 1000)
		}
		d.have[i] = true
	}
}

// readAttr reads dir/attr of the class directory into th.buf.
func (th *thermal) readAttr(dir []byte, attr string) ([]byte, error) {
	th.path = append(append(append(append(th.path[:0], dir...), '/'), attr...), 0)
	return kfile.ReadFileAt(th.fd, th.path, &th.buf, 4096)
}
