package rrdd

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func encodeV2(t testing.TB, dss []Datasource, ts int64, vals ...Value) []byte {
	t.Helper()
	enc, err := NewEncoder(V2, dss)
	if err != nil {
		t.Fatal(err)
	}
	b, err := enc.Encode(time.Unix(ts, 0), vals)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

func twoDS() []Datasource {
	a := NewDatasource("a", Int64)
	b := NewDatasource("b", Float)
	b.Type = Gauge
	return []Datasource{a, b}
}

func wantValues(t *testing.T, r *Reader, want ...Value) {
	t.Helper()
	got := r.Values()
	if len(got) != len(want) {
		t.Fatalf("Values = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Values[%d] = %#x; want %#x", i, got[i], want[i])
		}
	}
}

func TestReadV2Rules(t *testing.T) {
	dss := twoDS()
	f1 := encodeV2(t, dss, 100, IntValue(1), FloatValue(1.5))
	f2 := encodeV2(t, dss, 102, IntValue(2), FloatValue(2.5))
	var r Reader

	// First read parses the metadata.
	if err := r.Read(f1); err != nil {
		t.Fatal(err)
	}
	wantValues(t, &r, IntValue(1), FloatValue(1.5))
	gen := r.MetadataGeneration()

	// Same data checksum: no update, not a failure, values kept.
	if err := r.Read(f1); !errors.Is(err, ErrNoUpdate) {
		t.Errorf("Read(same) = %v; want ErrNoUpdate", err)
	}
	wantValues(t, &r, IntValue(1), FloatValue(1.5))

	// A torn read: value bytes differ from the data checksum. Last good values kept.
	torn := bytes.Clone(f2)
	torn[v2Values+3] ^= 0x40
	if err := r.Read(torn); !errors.Is(err, ErrChecksum) {
		t.Errorf("Read(torn) = %v; want ErrChecksum", err)
	}
	wantValues(t, &r, IntValue(1), FloatValue(1.5))

	// Values change, metadata checksum unchanged: cached datasources, no reparse.
	if err := r.Read(f2); err != nil {
		t.Fatal(err)
	}
	wantValues(t, &r, IntValue(2), FloatValue(2.5))
	if st := r.Stats(); st.Reparses != 1 || st.Updates != 2 || st.NoUpdates != 1 || st.Torn != 1 {
		t.Errorf("Stats = %+v; want 1 reparse, 2 updates, 1 no-update, 1 torn", st)
	}
	if r.MetadataGeneration() != gen {
		t.Errorf("metadata generation changed without a metadata change")
	}
	// The cached metadata is used even if the metadata bytes are now garbage (it is not read).
	junk := bytes.Clone(encodeV2(t, dss, 104, IntValue(3), FloatValue(3.5)))
	for i := v2Values + 16 + 4; i < len(junk); i++ {
		junk[i] = '#'
	}
	if err := r.Read(junk); err != nil {
		t.Errorf("Read(values only, metadata bytes unread) = %v", err)
	}

	// Metadata changes: reparsed, generation bumps.
	dss3 := append(twoDS(), NewDatasource("c", Int64))
	f3 := encodeV2(t, dss3, 106, IntValue(4), FloatValue(4.5), IntValue(-4))
	if err := r.Read(f3); err != nil {
		t.Fatal(err)
	}
	if r.MetadataGeneration() == gen || len(r.Datasources()) != 3 || r.Datasources()[2].Name != "c" {
		t.Errorf("after metadata change: gen %d, %+v", r.MetadataGeneration(), r.Datasources())
	}
	wantValues(t, &r, IntValue(4), FloatValue(4.5), IntValue(-4))
}

func TestReadV2Errors(t *testing.T) {
	dss := twoDS()
	good := encodeV2(t, dss, 100, IntValue(1), FloatValue(1.5))
	metaStart := v2Values + 16 + 4
	withMeta := func(meta string, count int) []byte {
		vals := make([]uint64, count)
		return buildV2(100, vals, meta, "")
	}
	cases := []struct {
		name string
		file []byte
		want error
	}{
		{"empty", nil, ErrHeader},
		{"wrong magic", append([]byte("DATASOURCEZ"), good[11:]...), ErrHeader},
		{"lower-case magic", append([]byte("datasources"), good[11:]...), ErrHeader},
		{"header only", good[:20], ErrTruncated},
		{"values cut", good[:v2Values+12], ErrTruncated},
		{"count too large", func() []byte {
			b := bytes.Clone(good)
			b[v2Count] = 0x7f
			return b
		}(), ErrTruncated},
		{"no metadata length", good[:v2Values+16], ErrTruncated},
		{"metadata cut", good[:len(good)-5], ErrTruncated},
		{"metadata corrupt", func() []byte {
			b := bytes.Clone(good)
			b[metaStart+3] ^= 1
			return b
		}(), ErrChecksum},
		{"data checksum wrong", func() []byte {
			b := bytes.Clone(good)
			b[v2DataCRC] ^= 1
			return b
		}(), ErrChecksum},
		{"metadata not JSON", withMeta(`{"datasources": {`, 0), ErrPayload},
		{"no datasources key", withMeta(`{"sources": {}}`, 0), ErrPayload},
		{"datasources not object", withMeta(`{"datasources": []}`, 0), ErrPayload},
		{"count below the metadata", withMeta(`{"datasources": {"a": {"value_type": "int64"}, "b": {"value_type": "int64"}}}`, 1), ErrPayload},
		{"value_type missing", withMeta(`{"datasources": {"a": {"type": "gauge"}}}`, 1), ErrPayload},
		{"value_type unknown", withMeta(`{"datasources": {"a": {"value_type": "int32"}}}`, 1), ErrPayload},
		{"type unknown", withMeta(`{"datasources": {"a": {"value_type": "int64", "type": "counter"}}}`, 1), ErrPayload},
		{"default not bool", withMeta(`{"datasources": {"a": {"value_type": "int64", "default": "yes"}}}`, 1), ErrPayload},
		{"min not number", withMeta(`{"datasources": {"a": {"value_type": "int64", "min": "low"}}}`, 1), ErrPayload},
		{"transform unknown", withMeta(`{"datasources": {"a": {"value_type": "int64", "transform": "log"}}}`, 1), ErrPayload},
		{"field is object", withMeta(`{"datasources": {"a": {"value_type": {}}}}`, 1), ErrPayload},
		{"duplicate name", withMeta(`{"datasources": {"a": {"value_type": "int64"}, "a": {"value_type": "int64"}}}`, 2), ErrPayload},
		{"junk after JSON", withMeta(`{"datasources": {}} x`, 0), ErrPayload},
	}
	for _, c := range cases {
		var r Reader
		err := r.Read(c.file)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Read = %v; want %v", c.name, err, c.want)
		}
		if len(r.Values()) != 0 || len(r.Datasources()) != 0 {
			t.Errorf("%s: failed read left values %v", c.name, r.Values())
		}
	}
}

func TestReadV2Recovery(t *testing.T) {
	// A payload error must not make the reader believe it has seen that data: after the
	// plugin fixes its metadata with the same values, the read succeeds.
	bad := buildV2(100, []uint64{7}, `{"datasources": {"a": {"value_type": "int65"}}}`, "")
	good := buildV2(100, []uint64{7}, `{"datasources": {"a": {"value_type": "int64"}}}`, "")
	var r Reader
	if err := r.Read(bad); !errors.Is(err, ErrPayload) {
		t.Fatalf("Read(bad) = %v", err)
	}
	if err := r.Read(good); err != nil {
		t.Fatalf("Read(good after bad, same data) = %v", err)
	}
	wantValues(t, &r, 7)

	// Header count falls below the unchanged metadata's entries: refused, values kept.
	b := buildV2(101, nil, `{"datasources": {"a": {"value_type": "int64"}}}`, "")
	if err := r.Read(b); !errors.Is(err, ErrPayload) {
		t.Errorf("Read(count below the metadata, metadata unchanged) = %v; want ErrPayload", err)
	}
	wantValues(t, &r, 7)
	// Header count grows while the metadata stays: read per entry, as xcp-rrdd does.
	b = buildV2(102, []uint64{8, 9}, `{"datasources": {"a": {"value_type": "int64"}}}`, "")
	if err := r.Read(b); err != nil {
		t.Errorf("Read(count above the metadata, metadata unchanged) = %v", err)
	}
	wantValues(t, &r, 8)

	// A first file whose data CRC happens to be 0 is still an update (no "last CRC = 0" trap).
	var r2 Reader
	if err := r2.Read(good); err != nil || len(r2.Values()) != 1 {
		t.Errorf("fresh reader: %v", err)
	}
}

func TestMetadataTolerance(t *testing.T) {
	cases := []struct {
		fields string
		check  func(d Datasource) bool
	}{
		{`"value_type": "INT64", "type": "Derive"`, func(d Datasource) bool { return d.ValueType == Int64 && d.Type == Derive }},
		{`"value_type": "float", "min": 0, "max": 100.5`, func(d Datasource) bool { return d.Min == 0 && d.Max == 100.5 }},
		{`"value_type": "float", "min": "-infinity", "max": "infinity"`, func(d Datasource) bool { return math.IsInf(d.Min, -1) && math.IsInf(d.Max, 1) }},
		{`"value_type": "float", "min": -Infinity, "max": Infinity`, func(d Datasource) bool { return math.IsInf(d.Min, -1) && math.IsInf(d.Max, 1) }},
		{`"value_type": "float", "min": "-inf", "max": "1e400"`, func(d Datasource) bool { return math.IsInf(d.Max, 1) }},
		{`"value_type": "float", "min": "NaN"`, func(d Datasource) bool { return math.IsNaN(d.Min) }},
		{`"value_type": "float", "default": true`, func(d Datasource) bool { return d.Default }},
		{`"value_type": "float", "default": "false"`, func(d Datasource) bool { return !d.Default }},
		{`"value_type": "float", "owner": "VM 1234-ab"`, func(d Datasource) bool { return d.Owner == "vm 1234-ab" }},
		{`"value_type": "float", "owner": "Host"`, func(d Datasource) bool { return d.Owner == "host" }},
		{`"value_type": "float", "owner": "rrd"`, func(d Datasource) bool { return d.Owner == "rrd" }},
		{`"value_type": "float", "owner": null, "units": null`, func(d Datasource) bool { return d.Owner == "host" && d.Units == "" }},
		{`"value_type": "float"`, func(d Datasource) bool {
			return d.Owner == "host" && d.Type == Absolute && !d.Default && math.IsInf(d.Min, -1) && math.IsInf(d.Max, 1) && d.Transform == Identity
		}},
		{`"value_type": "float", "transform": "inverse", "value": "3.00", "extra": [1, {"x": null}]`, func(d Datasource) bool { return d.Transform == Inverse }},
		{`"value_type": "float", "description": "\u00e9\ud83d\ude00\n\"q\""`, func(d Datasource) bool { return d.Description == "é😀\n\"q\"" }},
	}
	for _, c := range cases {
		meta := `{"datasources": {"x": {` + c.fields + `}}}`
		var r Reader
		if err := r.Read(buildV2(1, []uint64{0}, meta, "")); err != nil {
			t.Errorf("%s: %v", c.fields, err)
			continue
		}
		if d := r.Datasources()[0]; !c.check(d) {
			t.Errorf("%s: parsed as %+v", c.fields, d)
		}
	}
}

func TestTimestampDecoding(t *testing.T) {
	for _, c := range []struct {
		bits uint64
		want int64
	}{
		{1700000000, 1700000000},
		{math.Float64bits(1700000000.25), 1700000000},
		{math.Float64bits(-5), 0},
		{1 << 63, 0},
	} {
		got := decodeTimestamp(c.bits)
		if got.IsZero() && c.want == 0 {
			continue
		}
		if got.Unix() != c.want {
			t.Errorf("decodeTimestamp(%#x) = %v; want %d", c.bits, got, c.want)
		}
	}
}

func TestReadV1Rules(t *testing.T) {
	json := func(v string) string {
		return `{"timestamp": 5, "datasources": {"n": {"value": ` + v + `, "value_type": "int64", "type": "derive"}, "f": {"value": "2.5"}}}`
	}
	var r Reader
	f1 := v1File(json(`"10"`))
	if err := r.Read(f1); err != nil {
		t.Fatal(err)
	}
	wantValues(t, &r, IntValue(10), FloatValue(2.5))
	if d := r.Datasources(); d[1].ValueType != Float || d[0].Type != Derive {
		t.Errorf("Datasources = %+v (v1 value_type defaults to float)", d)
	}
	gen := r.MetadataGeneration()
	if err := r.Read(f1); !errors.Is(err, ErrNoUpdate) {
		t.Errorf("Read(same) = %v; want ErrNoUpdate", err)
	}
	// Bare numbers (Python) and integral floats for int64.
	if err := r.Read(v1File(json(`11.0`))); err != nil {
		t.Fatal(err)
	}
	wantValues(t, &r, IntValue(11), FloatValue(2.5))
	if r.MetadataGeneration() != gen {
		t.Error("v1 metadata generation changed though only values did")
	}
	torn := v1File(json(`12`))
	torn[len(torn)-10] ^= 1
	if err := r.Read(torn); !errors.Is(err, ErrChecksum) {
		t.Errorf("Read(torn v1) = %v; want ErrChecksum", err)
	}
	wantValues(t, &r, IntValue(11), FloatValue(2.5))
	for name, c := range map[string]struct {
		file []byte
		want error
	}{
		"bad length":      {[]byte("DATASOURCES\n0000zz01\n" + strings.Repeat("0", 32) + "\n{}"), ErrHeader},
		"bad md5 hex":     {[]byte("DATASOURCES\n00000002\n" + strings.Repeat("g", 32) + "\n{}"), ErrHeader},
		"no newline":      {[]byte("DATASOURCES\n00000002\n" + strings.Repeat("0", 32) + "x{}"), ErrHeader},
		"too long":        {[]byte("DATASOURCES\n00000099\n" + strings.Repeat("0", 32) + "\n{}"), ErrTruncated},
		"fraction int64":  {v1File(json(`"1.5"`)), ErrPayload},
		"value missing":   {v1File(`{"datasources": {"a": {}}}`), ErrPayload},
		"timestamp words": {v1File(`{"timestamp": "soon", "datasources": {}}`), ErrPayload},
	} {
		var r Reader
		if err := r.Read(c.file); !errors.Is(err, c.want) {
			t.Errorf("%s: Read = %v; want %v", name, err, c.want)
		}
	}
}

func TestProtocolSwitch(t *testing.T) {
	var r Reader
	if err := r.Read(v1File(`{"timestamp": 1, "datasources": {"a": {"value": 1}}}`)); err != nil {
		t.Fatal(err)
	}
	gen := r.MetadataGeneration()
	if err := r.Read(encodeV2(t, twoDS(), 2, IntValue(5), FloatValue(6))); err != nil {
		t.Fatal(err)
	}
	if r.Protocol() != V2 || r.MetadataGeneration() == gen || len(r.Datasources()) != 2 {
		t.Errorf("after switch to v2: protocol %d, %+v", r.Protocol(), r.Datasources())
	}
}

func TestEncoderErrors(t *testing.T) {
	if _, err := NewEncoder(3, nil); err == nil {
		t.Error("NewEncoder(3) succeeded")
	}
	for _, dss := range [][]Datasource{
		{{Name: "", ValueType: Int64}},
		{{Name: "a"}},
		{{Name: "a", ValueType: Int64, Type: 9}},
		{{Name: "a", ValueType: Int64}, {Name: "a", ValueType: Float}},
	} {
		if _, err := NewEncoder(V2, dss); err == nil {
			t.Errorf("NewEncoder(%+v) succeeded", dss)
		}
	}
	enc, _ := NewEncoder(V2, twoDS())
	if _, err := enc.Encode(time.Unix(0, 0), []Value{1}); err == nil {
		t.Error("Encode with too few values succeeded")
	}
}

func TestRoundTripOddNames(t *testing.T) {
	for _, p := range []Protocol{V1, V2} {
		dss := []Datasource{NewDatasource("quote\"back\\slash\x01", Float), NewDatasource("ünï", Int64)}
		dss[0].Owner = "vm 00000000-aaaa"
		dss[1].Min, dss[1].Max = -3, 1e6
		enc, err := NewEncoder(p, dss)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := enc.Encode(time.Unix(9, 0), []Value{FloatValue(math.Inf(-1)), IntValue(math.MinInt64)})
		var r Reader
		if err := r.Read(b); err != nil {
			t.Fatalf("v%d: %v", p, err)
		}
		if !sameDatasources(r.Datasources(), dss) {
			t.Errorf("v%d: Datasources = %+v; want %+v", p, r.Datasources(), dss)
		}
		wantValues(t, &r, FloatValue(math.Inf(-1)), IntValue(math.MinInt64))
	}
}

func TestWriterFile(t *testing.T) {
	path := t.TempDir() + "/plugin"
	for _, p := range []Protocol{V2, V1} {
		w, err := Create(path, p, twoDS())
		if err != nil {
			t.Fatal(err)
		}
		var r Reader
		for i := range 3 {
			if err := w.Write(time.Unix(int64(100+i), 0), []Value{IntValue(int64(i)), FloatValue(float64(i) / 2)}); err != nil {
				t.Fatal(err)
			}
			b := readFile(t, path)
			if err := r.Read(b); err != nil {
				t.Fatalf("v%d write %d: %v", p, i, err)
			}
			wantValues(t, &r, IntValue(int64(i)), FloatValue(float64(i)/2))
		}
		// Shrinking the metadata truncates the file.
		if err := w.SetDatasources(twoDS()[:1]); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(time.Unix(200, 0), []Value{IntValue(9)}); err != nil {
			t.Fatal(err)
		}
		b := readFile(t, path)
		if err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		wantValues(t, &r, IntValue(9))
		enc, _ := NewEncoder(p, twoDS()[:1])
		want, _ := enc.Encode(time.Unix(200, 0), []Value{IntValue(9)})
		if !bytes.Equal(b, want) {
			t.Errorf("v%d: file is %d bytes, want exactly the %d-byte image", p, len(b), len(want))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if err := w.Write(time.Unix(1, 0), []Value{1}); err == nil {
			t.Error("Write after Close succeeded")
		}
		if _, err := readFileErr(path); err == nil {
			t.Error("Close left the file behind")
		}
	}
}

func ExampleWriter() {
	temp := NewDatasource("cpu-temp-cpu0", Float)
	temp.Description, temp.Units, temp.Type = "Temperature of CPU 0", "degC", Gauge
	enc, _ := NewEncoder(V2, []Datasource{temp})
	b, _ := enc.Encode(time.Unix(1339685573, 0), []Value{FloatValue(64.33)})

	var r Reader
	_ = r.Read(b)
	fmt.Println(r.Datasources()[0].Name, r.Values()[0].Float(), r.Datasources()[0].Type)
	// Output: cpu-temp-cpu0 64.33 gauge
}

// TestReadV2CountAboveMetadataReadsPerEntry: a header that counts more values than the metadata
// lists (XAPI's rrdd.py when a plugin sets one name twice) is read as xcp-rrdd reads it: one value
// per metadata entry, in order, the extra values unread; also once the metadata is cached.
func TestReadV2CountAboveMetadataReadsPerEntry(t *testing.T) {
	meta := `{"datasources": {"a": {"value_type": "int64"}, "b": {"value_type": "float"}}}`
	var r Reader
	for i, vals := range [][]uint64{
		{5, math.Float64bits(2.5), 9},
		{6, math.Float64bits(3.5), 10},
	} {
		if err := r.Read(buildV2(math.Float64bits(float64(100+i)), vals, meta, "")); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		dss := r.Datasources()
		if len(dss) != 2 || dss[0].Name != "a" || dss[1].Name != "b" {
			t.Fatalf("read %d: Datasources = %+v", i, dss)
		}
		wantValues(t, &r, IntValue(int64(vals[0])), FloatValue(math.Float64frombits(vals[1])))
	}
	if got := r.Stats().Reparses; got != 1 {
		t.Errorf("Reparses = %d; want 1 (the second read reuses the metadata)", got)
	}
}
