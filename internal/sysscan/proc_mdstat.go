package sysscan

// /proc/mdstat: software RAID arrays (System).

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

// mdStates are the values of md.state's state label, in mdArray.State's numbering.
var mdStates = [...]string{"active", "inactive", "recovering", "resync", "check"}

const (
	mdActive = iota
	mdInactive
	mdRecovering
	mdResync
	mdCheck
)

// mdArray is one array of /proc/mdstat.
type mdArray struct {
	Name                        []byte
	State                       int // index into mdStates
	Required                    int64
	Active, Failed, Spare, Down int64
	Blocks, Synced              int64
}

// parseMdstat parses /proc/mdstat:
//
//	Personalities : [raid1] [raid6] [raid5] [raid4]
//	md0 : active raid5 sdc[3] sdb[1] sda[0](F)
//	      1953260544 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]
//	      [=>...................]  recovery =  8.5% (83034112/976630272) finish=80.1min speed=185716K/sec
//	md1 : inactive sdd[0](S)
//	      1000 blocks super 1.2
//	unused devices: <none>
//
// Disks: Required and Active are n and m of "[n/m]" (for raid0 and linear arrays, which have
// none, the number of members; 0 for an inactive array), Failed and Spare the members marked
// (F) and (S), Down the '_' of "[UU_]". Synced is the first number of "(synced/total)" on a
// recovery, resync or check line, else Blocks.
func parseMdstat(b []byte, dst []mdArray) ([]mdArray, error) {
	var cur *mdArray
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !kfile.IsSpace(line[0]) {
			cur = nil
			if bytes.HasPrefix(line, []byte("Personalities")) || bytes.HasPrefix(line, []byte("unused devices")) {
				continue
			}
			a, err := parseMdDeviceLine(line)
			if err != nil {
				return dst, err
			}
			dst = append(dst, a)
			cur = &dst[len(dst)-1]
			continue
		}
		if cur == nil {
			return dst, kfile.ParseError("mdstat", line, fmt.Errorf("continuation line without an array"))
		}
		if err := parseMdDetailLine(cur, line); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func parseMdDeviceLine(line []byte) (mdArray, error) {
	var a mdArray
	name, p := kfile.Field(line, 0)
	colon, p := kfile.Field(line, p)
	state, p := kfile.Field(line, p)
	if name == nil || string(colon) != ":" || state == nil {
		return a, kfile.ParseError("mdstat", line, kfile.ErrSyntax)
	}
	a.Name = name
	switch string(state) {
	case "active":
		a.State = mdActive
	case "inactive":
		a.State = mdInactive
	default:
		return a, kfile.ParseError("mdstat", line, fmt.Errorf("unknown array state"))
	}
	raid0 := false
	var members int64
	for {
		var f []byte
		f, p = kfile.Field(line, p)
		if f == nil {
			break
		}
		if f[0] == '(' { // (auto-read-only), (read-only)
			continue
		}
		i := kfile.IndexByte(f, '[')
		if i < 0 { // the personality
			raid0 = raid0 || string(f) == "raid0" || string(f) == "linear"
			continue
		}
		if i == 0 {
			return a, kfile.ParseError("mdstat", line, fmt.Errorf("member without a name"))
		}
		members++
		switch {
		case bytes.HasSuffix(f, []byte("(F)")):
			a.Failed++
		case bytes.HasSuffix(f, []byte("(S)")):
			a.Spare++
		}
	}
	if raid0 && a.State == mdActive {
		a.Required, a.Active = members, members-a.Failed
	}
	return a, nil
}

func parseMdDetailLine(a *mdArray, line []byte) error {
	first, p := kfile.Field(line, 0)
	next, _ := kfile.Field(line, p)
	if string(next) == "blocks" {
		n, err := kfile.ParseInt(first)
		if err != nil {
			return kfile.ParseError("mdstat", line, err)
		}
		a.Blocks, a.Synced = n, n
		for {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			if len(f) < 3 || f[0] != '[' || f[len(f)-1] != ']' {
				continue
			}
			in := f[1 : len(f)-1]
			if s := kfile.IndexByte(in, '/'); s >= 0 {
				req, err1 := kfile.ParseInt(in[:s])
				act, err2 := kfile.ParseInt(in[s+1:])
				if err1 != nil || err2 != nil {
					return kfile.ParseError("mdstat", line, kfile.ErrSyntax)
				}
				a.Required, a.Active = req, act
			} else if len(bytes.Trim(in, "U_")) == 0 {
				a.Down = int64(bytes.Count(in, []byte("_")))
			}
		}
		return nil
	}
	for _, op := range [...]struct {
		word  string
		state int
	}{{"recovery", mdRecovering}, {"reshape", mdRecovering}, {"resync", mdResync}, {"check", mdCheck}} {
		i := bytes.Index(line, []byte(op.word+" ="))
		if i < 0 {
			continue
		}
		a.State = op.state
		rest := line[i:]
		o, c := kfile.IndexByte(rest, '('), kfile.IndexByte(rest, ')')
		if o < 0 || c < o {
			return kfile.ParseError("mdstat", line, fmt.Errorf("no (synced/total)"))
		}
		in := rest[o+1 : c]
		s := kfile.IndexByte(in, '/')
		if s < 0 {
			return kfile.ParseError("mdstat", line, kfile.ErrSyntax)
		}
		n, err := kfile.ParseInt(in[:s])
		if err != nil {
			return kfile.ParseError("mdstat", line, err)
		}
		a.Synced = n
		return nil
	}
	if bytes.Contains(line, []byte("resync=")) { // resync=DELAYED, resync=PENDING
		a.State = mdResync
	}
	return nil // bitmap: and other lines
}

// md series of one array, in the order of mdStates for state and of mdDiskStates for disks.
type mdRefs struct {
	state          [len(mdStates)]*series.Ref
	disks          [len(mdDiskStates)]*series.Ref
	required       *series.Ref
	blocks, synced *series.Ref
	scanmark.Mark  // the latest scan that saw it
}

var mdDiskStates = [...]string{"active", "failed", "spare", "down"}

func (s *System) collectMdstat(b []byte, sink series.Sink) error {
	var err error
	s.mds, err = parseMdstat(b, s.mds[:0])
	for i := range s.mds {
		a := &s.mds[i]
		r := s.md[string(a.Name)]
		if r == nil {
			dev := kfile.ValidString(a.Name)
			r = &mdRefs{}
			for j, st := range mdStates {
				r.state[j] = sink.Series(series.Labels{"metric": "md.state", "device": dev, "state": st}, series.Level)
			}
			for j, st := range mdDiskStates {
				r.disks[j] = sink.Series(series.Labels{"metric": "md.disks", "device": dev, "state": st}, series.Level)
			}
			r.required = sink.Series(series.Labels{"metric": "md.disks_required", "device": dev}, series.Level)
			r.blocks = sink.Series(series.Labels{"metric": "md.blocks", "device": dev}, series.Level)
			r.synced = sink.Series(series.Labels{"metric": "md.blocks_synced", "device": dev}, series.Level)
			s.md[string(a.Name)] = r
		}
		if r.Seen(s.gen) {
			continue // a name twice: keep the first
		}
		r.See(s.gen)
		for j := range r.state {
			sink.Put(r.state[j], boolBits(j == a.State))
		}
		for j, v := range [len(mdDiskStates)]int64{a.Active, a.Failed, a.Spare, a.Down} {
			sink.Put(r.disks[j], uint64(v))
		}
		sink.Put(r.required, uint64(a.Required))
		sink.Put(r.blocks, uint64(a.Blocks))
		sink.Put(r.synced, uint64(a.Synced))
	}
	return err
}

// mdstatState is what System keeps of /proc/mdstat.
type mdstatState struct {
	md  map[string]*mdRefs
	mds []mdArray
}
