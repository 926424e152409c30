package cantalv1

import (
	"math"
	"sort"
	"strings"

	"github.com/cantal-go/cantal/internal/series"
)

// The original's value types (cantal_values::Value and its history chunks), with the tags its
// CBOR encoding gives them.
const (
	typState   = 0
	typCounter = 1
	typInteger = 2
	typFloat   = 3
)

// origKey is one of this agent's series under the original's key: its labels, their CBOR key
// bytes (cantal_history::Key: a CBOR map of text to text, keys in byte order; set by withBytes,
// only for the series an answer holds), the original's value type, and how a value of ours
// becomes the original's.
type origKey struct {
	labels series.Labels
	bytes  []byte
	typ    int
	div    uint64 // a counter's value is divided by div (ms to ticks, bytes to sectors); 0: 1
}

// cpuStates are the columns of /proc/stat's cpu line, which the original reports as cpu.NAME in
// clock ticks and this agent as cpu.NAME_ms in milliseconds.
var cpuStates = map[string]bool{"user": true, "nice": true, "system": true, "idle": true, "iowait": true,
	"irq": true, "softirq": true, "steal": true, "guest": true, "guest_nice": true}

// renamed are the machine series whose only change is the metric name (and the value type the
// original gives them).
var renamed = map[string]struct {
	name string
	typ  int
}{
	"system.uptime_s":       {"uptime", typFloat},
	"system.idle_s":         {"idle_time", typFloat},
	"system.load_avg_1min":  {"load_avg_1min", typFloat},
	"system.load_avg_5min":  {"load_avg_5min", typFloat},
	"system.load_avg_15min": {"load_avg_15min", typFloat},
	"system.tasks_runnable": {"proc_runnable", typCounter},
	"system.tasks_total":    {"proc_total", typCounter},
	"tcp.tx_queue":          {"net.tcp.tx_queue", typInteger},
	"tcp.rx_queue":          {"net.tcp.rx_queue", typInteger},
}

// diskRenamed are the disk series under other names in the original, with their divisor.
var diskRenamed = map[string]struct {
	name string
	div  uint64
}{
	"disk.read.bytes":          {"disk.read.sectors", 512},
	"disk.write.bytes":         {"disk.write.sectors", 512},
	"disk.read.time_ms":        {"disk.read.time", 0},
	"disk.write.time_ms":       {"disk.write.time", 0},
	"disk.io_time_ms":          {"disk.time", 0},
	"disk.weighted_io_time_ms": {"disk.weighted_time", 0},
}

// tcpStates are the tcp.sockets states the original counts, under its names.
var tcpStates = map[string]string{"established": "net.tcp.established", "close_wait": "net.tcp.close_wait",
	"time_wait": "net.tcp.time_wait", "listen": "net.tcp.listening"}

// netDevRenamed are /proc/net/dev's columns this agent names differently.
var netDevRenamed = map[string]string{"errors": "errs", "collisions": "colls"}

// mapKey returns series l of kind k under the original's key. Series the original also has take
// its name, unit and type (docs/original-api.md has the table); every other series keeps its own
// labels, with the original's type for its kind.
func mapKey(l series.Labels, k series.Kind) origKey {
	typ := kindType(k)
	out := l
	var div uint64
	m := l["metric"]
	switch {
	case len(l) == 1 && renamed[m].name != "":
		r := renamed[m]
		out, typ = series.Labels{"metric": r.name}, r.typ
	case len(l) == 1 && strings.HasPrefix(m, "cpu.") && strings.HasSuffix(m, "_ms") && cpuStates[m[4:len(m)-3]] && k == series.Counter:
		out, div = series.Labels{"metric": m[:len(m)-3]}, 1000/ticksPerSecond
	case len(l) == 2 && l["device"] != "" && strings.HasPrefix(m, "disk.") && diskRenamed[m].name != "":
		r := diskRenamed[m]
		out, div = series.Labels{"metric": r.name, "device": l["device"]}, r.div
	case len(l) == 2 && m == "tcp.sockets" && tcpStates[l["state"]] != "":
		out, typ = series.Labels{"metric": tcpStates[l["state"]]}, typInteger
	case len(l) == 2 && m == "tcp.listen.established" && l["port"] != "":
		out, typ = series.Labels{"metric": "net.tcp.passive.established", "port": l["port"]}, typInteger
	case len(l) == 2 && l["interface"] != "" && strings.HasPrefix(m, "net.interface."):
		rest := m[len("net.interface."):]
		if dir, col, ok := strings.Cut(rest, "."); ok && netDevRenamed[col] != "" {
			out = series.Labels{"metric": "net.interface." + dir + "." + netDevRenamed[col], "interface": l["interface"]}
		}
	}
	return origKey{labels: out, typ: typ, div: div}
}

// withBytes returns k with its key bytes.
func (k origKey) withBytes() origKey {
	k.bytes = keyBytes(k.labels)
	return k
}

func kindType(k series.Kind) int {
	switch k {
	case series.Counter:
		return typCounter
	case series.Level:
		return typInteger
	case series.Float:
		return typFloat
	}
	return typState
}

// keyBytes encodes l as the original's Key: a CBOR map of text to text, pairs sorted by key as
// a Rust BTreeMap sorts them (byte order of the strings, not of their encodings). No label set
// encodes as the empty key the original gives a sum.
func keyBytes(l series.Labels) []byte {
	if len(l) == 0 {
		return []byte{}
	}
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Strings(names)
	b := cborHead(nil, 5, uint64(len(names)))
	for _, n := range names {
		b = cborText(b, n)
		b = cborText(b, l[n])
	}
	return b
}

func cborText(b []byte, s string) []byte {
	return append(cborHead(b, 3, uint64(len(s))), s...)
}

// cborHead appends a CBOR head of major type major and argument n.
func cborHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= math.MaxUint8:
		return append(b, m|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// value is one value in the original's type: u for a counter, i for an integer, f for a float,
// text and since for a state.
type value struct {
	typ   int
	u     uint64
	i     int64
	f     float64
	text  string
	since int64
}

// convert turns raw bits of kind k into the original's value for key ok.
func (ok origKey) convert(k series.Kind, bits uint64) value {
	v := value{typ: ok.typ}
	switch k {
	case series.Counter:
		if ok.div > 1 {
			bits /= ok.div
		}
		v.u, v.i, v.f = bits, int64(min(bits, math.MaxInt64)), float64(bits)
	case series.Level:
		n := int64(bits)
		v.u, v.i, v.f = uint64(max(n, 0)), n, float64(n)
	default:
		f := math.Float64frombits(bits)
		v.f = f
		if !math.IsNaN(f) {
			v.i = int64(max(min(f, math.MaxInt64), math.MinInt64))
			v.u = uint64(max(min(f, math.MaxUint64), 0))
		}
	}
	return v
}

// cbor returns v as the original encodes a cantal_values::Value: [tag, value], a state's value
// being [since, text].
func (v value) cbor() []any {
	switch v.typ {
	case typCounter:
		return []any{typCounter, v.u}
	case typInteger:
		return []any{typInteger, v.i}
	case typFloat:
		return []any{typFloat, v.f}
	}
	return []any{typState, []any{uint64(max(v.since, 0)), v.text}}
}
