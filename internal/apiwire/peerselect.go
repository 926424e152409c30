package apiwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The peer select: how the cluster-wide query (/cluster/prometheus, package promcluster) asks
// a peer for the samples of all the selectors of one query at once, in one request, and gets
// them in a packed binary answer rather than Prometheus's JSON.
//
// Request: GET PeerSelectPath?s=SELECTOR&s=... , each s a PeerSelector (its Param form:
// "START,END,KIND,{matchers}", START and END unix milliseconds, KIND "p" for points or "l" for
// labels only), at most MaxPeerSelectors of them.
//
// Answer (200, Content-Type PeerSelectType): PeerSelectMagic, then for each selector in the
// request's order a uvarint count of series and the series, each
//
//	uvarint count of labels, then each label's name and value (uvarint length, bytes),
//	uvarint count of chunks, then each chunk (uvarint length, bytes)
//
// where a chunk is a Prometheus XOR chunk (tsdb/chunkenc EncXOR: the history's own float
// encoding, a sample in about 1–2 bytes where JSON takes about 25) of the series' samples in
// [START, END], in time order, chunks one after the other; a labels-only selector's series have
// no chunks. A peer that does not know the path (an older agent) answers 404 or something
// without the magic, and is asked the old way (its /prometheus/api/v1/query, one selector at a
// time). An error is Prometheus's JSON error answer with its status.
const (
	PeerSelectPath   = "/prometheus/peer/v1/select"
	PeerSelectType   = "application/vnd.cantal.peer-select.v1"
	PeerSelectMagic  = "cantal-peer-select-v1\n"
	MaxPeerSelectors = 256
)

// The peer part: a cluster query's aggregation pushed down to a peer (promcluster's Plan) is
// the peer's node-local query_range (/prometheus/api/v1/query_range) with PeerPartParam set to
// PeerPartV1. A peer that knows it answers a matrix (200, Content-Type PeerSelectType) as a
// peer select answer of one selector (the matrix's series, their points the samples of the
// XOR chunks) followed by the answer's warnings, then its infos, each a uvarint count and as
// many strings (uvarint length, bytes). An older agent ignores the parameter and answers
// Prometheus's JSON (no PeerSelectMagic); an error is Prometheus's JSON error answer.
const (
	PeerPartParam = "cantal_part"
	PeerPartV1    = "v1"
)

// AppendPeerStrings appends a count of strings and the strings (a peer part's warnings or
// infos).
func AppendPeerStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// DecodePeerPart reads a peer part answer: its series, warnings and infos, checked as
// DecodePeerSelect checks an answer. An answer without the magic is ErrNotPeerSelect (a peer
// that answered Prometheus's JSON).
func DecodePeerPart(b []byte) (series []PeerSeries, warnings, infos []string, err error) {
	if !bytes.HasPrefix(b, []byte(PeerSelectMagic)) {
		return nil, nil, nil, ErrNotPeerSelect
	}
	d := peerDecoder{b: b[len(PeerSelectMagic):]}
	if series, err = d.list(); err != nil {
		return nil, nil, nil, err
	}
	warnings, infos = d.strings(), d.strings()
	if d.err != nil {
		return nil, nil, nil, fmt.Errorf("warnings and infos: %w", d.err)
	}
	if len(d.b) != 0 {
		return nil, nil, nil, fmt.Errorf("%d bytes after the infos", len(d.b))
	}
	return series, warnings, infos, nil
}

// PeerSelector is one selector of a peer select request.
type PeerSelector struct {
	Start, End int64 // unix ms, both included
	LabelsOnly bool
	Matchers   string // a PromQL selector, {a="b",...}
}

// Param is s as the request's s parameter.
func (s PeerSelector) Param() string {
	kind := "p"
	if s.LabelsOnly {
		kind = "l"
	}
	return strconv.FormatInt(s.Start, 10) + "," + strconv.FormatInt(s.End, 10) + "," + kind + "," + s.Matchers
}

// ParsePeerSelector reads a request's s parameter.
func ParsePeerSelector(p string) (PeerSelector, error) {
	var s PeerSelector
	parts := strings.SplitN(p, ",", 4)
	if len(parts) != 4 {
		return s, errors.New("selector: want START,END,KIND,MATCHERS")
	}
	var err error
	if s.Start, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return s, fmt.Errorf("selector start: %w", err)
	}
	if s.End, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return s, fmt.Errorf("selector end: %w", err)
	}
	switch parts[2] {
	case "p":
	case "l":
		s.LabelsOnly = true
	default:
		return s, fmt.Errorf("selector kind %q: want p or l", parts[2])
	}
	s.Matchers = parts[3]
	return s, nil
}

// PeerSeries is one series of a peer select answer.
type PeerSeries struct {
	Labels []string // name, value, name, value, ...
	Chunks [][]byte // XOR chunks; decoded ones share the answer's bytes
}

// AppendPeerSelectHeader appends the answer's magic.
func AppendPeerSelectHeader(b []byte) []byte { return append(b, PeerSelectMagic...) }

// AppendPeerSelectCount appends the count of series of the next selector.
func AppendPeerSelectCount(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// AppendPeerSeries appends one series.
func AppendPeerSeries(b []byte, s PeerSeries) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.Labels)/2))
	for _, l := range s.Labels[:len(s.Labels)/2*2] {
		b = binary.AppendUvarint(b, uint64(len(l)))
		b = append(b, l...)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Chunks)))
	for _, c := range s.Chunks {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

// ErrNotPeerSelect is the error of an answer that does not start with PeerSelectMagic (a peer
// that does not know the peer select).
var ErrNotPeerSelect = errors.New("not a peer select answer")

// DecodePeerSelect reads an answer to a request of n selectors: n lists of series. Every count
// and length is checked against the bytes left, so a hostile answer costs at most its own
// length; the chunks are returned as they are (their samples are the caller's to check).
func DecodePeerSelect(b []byte, n int) ([][]PeerSeries, error) {
	if !bytes.HasPrefix(b, []byte(PeerSelectMagic)) {
		return nil, ErrNotPeerSelect
	}
	d := peerDecoder{b: b[len(PeerSelectMagic):]}
	out := make([][]PeerSeries, n)
	for i := range out {
		list, err := d.list()
		if err != nil {
			return nil, fmt.Errorf("selector %d: %w", i, err)
		}
		out[i] = list
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last selector", len(d.b))
	}
	return out, nil
}

// list reads one selector's series.
func (d *peerDecoder) list() ([]PeerSeries, error) {
	// A series takes at least 2 bytes (no labels, no chunks).
	count := d.count(2)
	if d.err != nil {
		return nil, d.err
	}
	list := make([]PeerSeries, count)
	for j := range list {
		nl := d.count(2)
		if d.err == nil {
			list[j].Labels = make([]string, 2*nl)
			for k := range list[j].Labels {
				list[j].Labels[k] = string(d.bytes())
			}
		}
		nc := d.count(1)
		if d.err == nil && nc > 0 {
			list[j].Chunks = make([][]byte, nc)
			for k := range list[j].Chunks {
				list[j].Chunks[k] = d.bytes()
			}
		}
		if d.err != nil {
			return nil, fmt.Errorf("series %d: %w", j, d.err)
		}
	}
	return list, nil
}

// strings reads a count of strings and the strings.
func (d *peerDecoder) strings() []string {
	n := d.count(1)
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = string(d.bytes())
	}
	return out
}

// peerDecoder reads uvarints and length-prefixed bytes; its first error sticks.
type peerDecoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("answer truncated or malformed")

func (d *peerDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errTruncated
		return 0
	}
	d.b = d.b[k:]
	return v
}

// count reads a count of items taking at least each bytes each, refusing one the bytes left
// cannot hold.
func (d *peerDecoder) count(each int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/each) {
		d.err = errTruncated
		return 0
	}
	return int(v)
}

func (d *peerDecoder) bytes() []byte {
	v := d.uvarint()
	if d.err != nil {
		return nil
	}
	if v > uint64(len(d.b)) {
		d.err = errTruncated
		return nil
	}
	out := d.b[:v:v]
	d.b = d.b[v:]
	return out
}
