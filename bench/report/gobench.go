package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// benchLine is one result line of `go test -bench`.
type benchLine struct {
	Pkg, Name string
	N         int64
	Metrics   []benchMetric
}

type benchMetric struct {
	Value float64
	Unit  string
}

// unitWords are the measures a figure's numerator can be; a unit "X/Y" whose X ends in one of
// them is a cost or a rate (ns/op, gossip-B/s/node), otherwise it is a ratio of two contenders
// (history/xor_bytes, shm/prometheus-cpu).
var unitWords = map[string]bool{"ns": true, "us": true, "µs": true, "ms": true, "s": true, "B": true, "KB": true,
	"MB": true, "bytes": true, "allocs": true, "lines": true, "pkt": true, "values": true, "samples": true, "op": true,
	"ops": true, "points": true, "series": true, "scans": true}

func (m benchMetric) isRatio() bool {
	num, _, ok := strings.Cut(m.Unit, "/")
	if !ok || num == "" {
		return false
	}
	if i := strings.LastIndexByte(num, '-'); i >= 0 {
		num = num[i+1:]
	}
	return !unitWords[num]
}

// parseBench reads `go test -bench` output: "pkg:" lines name the package of the results after
// them; a result line is a name starting with Benchmark, an iteration count, then value-unit
// pairs. Other lines are ignored; a result line that does not parse is an error.
func parseBench(r io.Reader) ([]benchLine, error) {
	var out []benchLine
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	ln := 0
	for sc.Scan() {
		ln++
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue // a name alone: the benchmark's own log output follows
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // "BenchmarkX ... log text", not a result
		}
		if len(f)%2 != 0 {
			return out, fmt.Errorf("line %d: odd number of value/unit fields: %q", ln, line)
		}
		b := benchLine{Pkg: pkg, Name: f[0], N: n}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return out, fmt.Errorf("line %d: value %q: %w", ln, f[i], err)
			}
			b.Metrics = append(b.Metrics, benchMetric{Value: v, Unit: f[i+1]})
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("bench output: %w", err)
	}
	return out, nil
}

func fmtValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1 || v <= -1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// benchMarkdown renders the results as one table per package, with the peer ratios in their
// own column.
func benchMarkdown(lines []benchLine) string {
	var md strings.Builder
	pkg := "\x00"
	for _, b := range lines {
		if b.Pkg != pkg {
			pkg = b.Pkg
			fmt.Fprintf(&md, "\n**%s**\n\n| benchmark | n | figures | peer ratios |\n|---|---:|---|---|\n", pkg)
		}
		var figs, ratios []string
		for _, m := range b.Metrics {
			s := fmtValue(m.Value) + " " + m.Unit
			if m.isRatio() {
				ratios = append(ratios, "**"+s+"**")
			} else {
				figs = append(figs, s)
			}
		}
		fmt.Fprintf(&md, "| %s | %d | %s | %s |\n", strings.ReplaceAll(b.Name, "|", `\|`), b.N, strings.Join(figs, ", "), strings.Join(ratios, ", "))
	}
	return md.String()
}
