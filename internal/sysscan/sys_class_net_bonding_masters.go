package sysscan

// /sys/class/net/bonding_masters: bonding interfaces and their slaves' link state (System), as
// node_exporter's bonding collector reads them.

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// bondingMaxFile caps bonding_masters, a bond's bonding/slaves and a slave's mii_status.
const bondingMaxFile = 64 << 10

// bondingState is System's state of the bonding collector: per bond, the number of its slaves
// and of those whose MII status is "up" (bonding.slaves and bonding.active, node_exporter's
// node_bonding_slaves and node_bonding_active). Only System's scan goroutine uses it.
type bondingState struct {
	bonds       map[string]*bondRefs // by bond name
	bondMissing bool                 // no bonding_masters: looked for again every rareEvery scans
	bondBuf     []byte
	bondMasters []byte // bonding_masters, copied out of bondBuf
	bondSlaves  []byte // the current bond's slaves file, copied out of bondBuf
	bondPath    []byte
	bondNames   [][]byte
	bondDir     string // sysDir/class/net
	bondFD      int    // bondDir, open while bondOpen (closed by System.Close)
	bondOpen    bool
	bondSlaveNs [][]byte
}

type bondRefs struct {
	slaves, active *series.Ref
	scanmark.Mark  // the latest scan that saw the bond
}

// errBondName is returned for a name in bonding_masters or bonding/slaves that cannot be an
// interface's name (and would lead the reader out of the bond's directory).
var errBondName = errors.New("not an interface name")

// parseBondNames parses bonding_masters or a bond's bonding/slaves: interface names separated
// by white space ("bond0 bond1\n"). It appends them to dst; a name that is not an interface
// name (longer than IFNAMSIZ-1, ".", "..", or with '/' or a control character) is an error.
func parseBondNames(b []byte, dst [][]byte) ([][]byte, error) {
	for p := 0; ; {
		var f []byte
		f, p = kfile.Field(b, p)
		if f == nil {
			return dst, nil
		}
		if len(f) > unix.IFNAMSIZ-1 || string(f) == "." || string(f) == ".." {
			return dst, kfile.ParseError("bonding", f, errBondName)
		}
		for _, c := range f {
			if c == '/' || c < ' ' || c == 0x7f {
				return dst, kfile.ParseError("bonding", f, errBondName)
			}
		}
		dst = append(dst, f)
	}
}

// parseMIIStatus says whether a slave's bonding_slave/mii_status says its link is up: node_exporter
// counts a slave active when the file's trimmed content is exactly "up".
func parseMIIStatus(b []byte) bool {
	for len(b) > 0 && kfile.IsSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && kfile.IsSpace(b[0]) {
		b = b[1:]
	}
	return string(b) == "up"
}

// collectBonding reads sysDir/class/net/bonding_masters, each bond's bonding/slaves and each
// slave's lower_<slave>/bonding_slave/mii_status (slave_<slave>/... on older kernels), at every
// scan: a bond's degradation is what NodeBondingDegraded alerts on. Without the bonding
// driver there is no bonding_masters; that gives no series and no problem and is looked for
// again every rareEvery scans. A bond that vanished while it was read is skipped; one whose
// files cannot be read or parsed is reported and skipped, and the other bonds are still read.
func (s *System) collectBonding(sysDir string, sink series.Sink, rare bool) {
	st := &s.bondingState
	if st.bonds == nil {
		st.bonds = map[string]*bondRefs{}
	}
	if st.bondMissing && !rare {
		return
	}
	if st.bondDir == "" {
		st.bondDir = filepath.Join(sysDir, "class/net")
	}
	dir := st.bondDir
	var err error
	if !st.bondOpen { // kept open: opening by name allocates
		st.bondFD, err = kfile.OpenDir(dir)
		st.bondOpen = err == nil
	}
	fd := st.bondFD
	if err == nil {
		var b []byte
		b, err = st.read(fd, "bonding_masters", nil, "")
		if err == nil {
			// copied: the reads below reuse bondBuf
			st.bondMasters = append(st.bondMasters[:0], b...)
			st.bondNames, err = parseBondNames(st.bondMasters, st.bondNames[:0])
		}
	}
	if err != nil {
		st.bondMissing = isAbsent(err)
		if !st.bondMissing {
			sink.Problem(filepath.Join(dir, "bonding_masters"), err.Error())
		}
		clear(st.bonds)
		st.closeBonding()
		return
	}
	st.bondMissing = false
	for _, master := range st.bondNames {
		n, up, err := st.readBond(fd, master)
		if err != nil {
			if !isAbsent(err) {
				sink.Problem(filepath.Join(dir, string(master)), err.Error())
			}
			continue
		}
		r := st.bonds[string(master)]
		if r == nil {
			name := kfile.ValidString(master)
			r = &bondRefs{
				slaves: sink.Series(series.Labels{"metric": "bonding.slaves", "master": name}, series.Level),
				active: sink.Series(series.Labels{"metric": "bonding.active", "master": name}, series.Level),
			}
			st.bonds[string(master)] = r
		}
		r.See(s.gen)
		sink.Put(r.slaves, uint64(n))
		sink.Put(r.active, uint64(up))
	}
	scanmark.Sweep(st.bonds, s.gen, nil)
}

// readBond counts master's slaves and those whose MII status is up.
func (st *bondingState) readBond(fd int, master []byte) (n, up int, err error) {
	b, err := st.read(fd, "", master, "/bonding/slaves")
	if err != nil {
		return 0, 0, err
	}
	st.bondSlaves = append(st.bondSlaves[:0], b...)
	st.bondSlaveNs, err = parseBondNames(st.bondSlaves, st.bondSlaveNs[:0])
	if err != nil {
		return 0, 0, err
	}
	for _, slave := range st.bondSlaveNs {
		b, err := st.readSlave(fd, master, "/lower_", slave)
		if errors.Is(err, unix.ENOENT) {
			b, err = st.readSlave(fd, master, "/slave_", slave)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("slave %s: %v", kfile.ValidString(slave), err) // not "vanished": the bond is there
		}
		n++
		if parseMIIStatus(b) {
			up++
		}
	}
	return n, up, nil
}

// read reads prefix+name+suffix, relative to the class directory fd, into bondBuf.
func (st *bondingState) read(fd int, prefix string, name []byte, suffix string) ([]byte, error) {
	st.bondPath = append(append(append(append(st.bondPath[:0], prefix...), name...), suffix...), 0)
	return kfile.ReadFileAt(fd, st.bondPath, &st.bondBuf, bondingMaxFile)
}

// readSlave reads master+kind+slave+"/bonding_slave/mii_status" into bondBuf.
func (st *bondingState) readSlave(fd int, master []byte, kind string, slave []byte) ([]byte, error) {
	st.bondPath = append(append(append(append(st.bondPath[:0], master...), kind...), slave...), "/bonding_slave/mii_status"...)
	st.bondPath = append(st.bondPath, 0)
	return kfile.ReadFileAt(fd, st.bondPath, &st.bondBuf, bondingMaxFile)
}

func (st *bondingState) closeBonding() {
	if st.bondOpen {
		unix.Close(st.bondFD)
		st.bondOpen = false
	}
}
