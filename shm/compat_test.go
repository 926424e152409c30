package shm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixtureValues reads a client fixture with a Reader and renders every entry as
// "labels=value", sorted.
func fixtureValues(t *testing.T, base string) []string {
	t.Helper()
	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	snap, err := r.Read()
	if err != nil {
		t.Fatalf("Read(%s): %v", base, err)
	}
	if len(snap.Layout.Skipped) > 0 {
		t.Errorf("Read(%s): skipped %q", base, snap.Layout.Skipped)
	}
	return render(snap.Layout, snap.Values)
}

func render(l *Layout, values []byte) []string {
	var out []string
	for i := range l.Entries {
		e := &l.Entries[i]
		keys := make([]string, 0, len(e.Labels))
		for k := range e.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%q ", k, e.Labels[k])
		}
		switch e.Kind {
		case KindCounter:
			fmt.Fprintf(&b, "counter %d", e.Counter(values))
		case KindLevel:
			fmt.Fprintf(&b, "level %d", e.Level(values))
		case KindFloat:
			fmt.Fprintf(&b, "float %g", e.Float(values))
		case KindState:
			since, text := e.State(values)
			fmt.Fprintf(&b, "state %d %q", since, text)
		}
		out = append(out, b.String())
	}
	slices.Sort(out)
	return out
}

func TestReadClientFixtures(t *testing.T) {
	tests := []struct {
		client string
		want   []string
	}{
		{"python", []string{
			`group="ü😀" metric="café" counter 1099511627776`,
			`metric="job" state 0 "finished long ago"`, // the original agent shows it too
			`metric="load" float 0.75`,
			`metric="queue.length" level -3`,
			`metric="requests.duration" unit="ms" counter 25191`,
			`metric="requests.number" counter 97`,
			`metric="sql.request" state 1700000000123 "SELECT * FROM t"`,
		}},
		{"rust", []string{
			`group="web" metric="requests" counter 12345`,
			`metric="connections" level 17`,
			`metric="cpu.usage" unit="%" float 12.5`,
			`metric="status" state 1600000000000 "serving"`,
		}},
		{"go", []string{
			`metric="errors" counter 0`,
			`metric="goroutines" level -1`,
			`metric="hits" path="/a<b>&c" counter 3`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			got := fixtureValues(t, filepath.Join("testdata", "compat", tt.client, "app"))
			if !slices.Equal(got, tt.want) {
				t.Errorf("values:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestWriterMatchesPythonClient declares the metrics of the Python fixture with our writer and
// checks that it writes the same bytes (our .meta adds the final newline Python omits).
func TestWriterMatchesPythonClient(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	Must(c.Counter(map[string]string{"metric": "requests.number"})).Add(97)
	Must(c.Counter(map[string]string{"metric": "requests.duration", "unit": "ms"})).Add(25191)
	Must(c.Integer(map[string]string{"metric": "queue.length"})).Set(-3)
	Must(c.Float(map[string]string{"metric": "load"})).Set(0.75)
	Must(c.Counter(map[string]string{"metric": "café", "group": "ü😀"})).Add(1 << 40)
	sql := Must(c.State(map[string]string{"metric": "sql.request"}, 64))
	job := Must(c.State(map[string]string{"metric": "job"}, 0))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sql.EnterAt("SELECT * FROM t", time.UnixMilli(1700000000123))
	job.EnterAt("finished long ago", time.UnixMilli(1))
	job.Exit()

	for _, ext := range []string{".meta", ".values"} {
		got, err := os.ReadFile(base + ext)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", "compat", "python", "app"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if ext == ".meta" {
			want = append(want, '\n')
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the Python client's:\n got %q\nwant %q", ext, got, want)
		}
	}
}

// originalAgentParse reads a .meta file with the rules of the original Cantal agent
// (cantal_values::Metadata::read): each line is trimmed, split at the first ':', the head split
// on single spaces into type, length and level kind, and the rest must be JSON.
func originalAgentParse(meta string) ([]string, error) {
	var types []string
	for _, line := range strings.SplitAfter(meta, "\n") {
		if line == "" {
			break
		}
		head, rest, hasRest := strings.Cut(strings.TrimSpace(line), ":")
		parts := strings.Split(head, " ")
		if len(parts) < 2 {
			return nil, fmt.Errorf("bad length in %q", line)
		}
		var n int
		if _, err := fmt.Sscan(parts[1], &n); err != nil || fmt.Sprint(n) != parts[1] {
			return nil, fmt.Errorf("bad length in %q", line)
		}
		if parts[0] == "pad" {
			types = append(types, head)
			continue
		}
		if parts[0] == "level" && (len(parts) < 3 || (parts[2] != "signed" && parts[2] != "unsigned" && parts[2] != "float")) {
			return nil, fmt.Errorf("bad kind of level in %q", line)
		}
		if !hasRest {
			return nil, fmt.Errorf("no description in %q", line)
		}
		if _, _, err := parseLabels([]byte(strings.TrimSpace(rest))); err != nil {
			return nil, err
		}
		types = append(types, head)
	}
	return types, nil
}

func TestWriterOutputReadByOriginalAgentRules(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	c := NewCollection(Options{Path: base})
	Must(c.Counter(map[string]string{"metric": "a:b", "x": "{\"}"}))
	Must(c.Integer(map[string]string{"metric": "i"}))
	Must(c.Float(map[string]string{"metric": "f"}))
	Must(c.State(map[string]string{"metric": "s"}, 100))
	Must(c.State(map[string]string{"metric": "t"}, 16))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta, err := os.ReadFile(base + ".meta")
	if err != nil {
		t.Fatal(err)
	}
	types, err := originalAgentParse(string(meta))
	if err != nil {
		t.Fatalf("original agent rules reject our meta: %v\n%s", err, meta)
	}
	want := []string{"counter 8", "level 8 float", "level 8 signed", "pad 40", "state 16", "pad 48", "state 100"}
	if !slices.Equal(types, want) {
		t.Errorf("types = %q; want %q", types, want)
	}
}
