package rrdd

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares b with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to create it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the golden file:\n got %q\nwant %q", name, b, want)
	}
}

// The seed's v2 metadata example, with its stray "{" removed so that it is JSON.
var seedV2Datasources = []Datasource{
	{Name: "memory_reclaimed", Description: "Host memory reclaimed by squeezed", Owner: "host", ValueType: Int64, Type: Absolute, Default: true, Units: "B", Min: math.Inf(-1), Max: math.Inf(1)},
	{Name: "memory_reclaimed_max", Description: "Host memory that could be reclaimed by squeezed", Owner: "host", ValueType: Int64, Type: Absolute, Default: true, Units: "B", Min: math.Inf(-1), Max: math.Inf(1)},
	{Name: "cpu-temp-cpu0", Description: "Temperature of CPU 0", Owner: "host", ValueType: Float, Type: Absolute, Default: true, Units: "degC", Min: math.Inf(-1), Max: math.Inf(1)},
	{Name: "cpu-temp-cpu1", Description: "Temperature of CPU 1", Owner: "host", ValueType: Float, Type: Absolute, Default: true, Units: "degC", Min: math.Inf(-1), Max: math.Inf(1)},
}

var seedV2Values = []Value{IntValue(1 << 20), IntValue(3 << 20), FloatValue(64.33), FloatValue(62.14)}

const seedTimestamp = 1339685573

// seedV2Metadata is the metadata the Encoder must write for seedV2Datasources: Python's
// json.dumps(sort_keys=True) layout, every field a string as xcp-rrdd requires.
const seedV2Metadata = `{"datasources": {` +
	`"memory_reclaimed": {"default": "true", "description": "Host memory reclaimed by squeezed", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "B", "value_type": "int64"}, ` +
	`"memory_reclaimed_max": {"default": "true", "description": "Host memory that could be reclaimed by squeezed", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "B", "value_type": "int64"}, ` +
	`"cpu-temp-cpu0": {"default": "true", "description": "Temperature of CPU 0", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "degC", "value_type": "float"}, ` +
	`"cpu-temp-cpu1": {"default": "true", "description": "Temperature of CPU 1", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "degC", "value_type": "float"}}}`

func TestGoldenV2Seed(t *testing.T) {
	enc, err := NewEncoder(V2, seedV2Datasources)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.Encode(time.Unix(seedTimestamp, 0), seedV2Values)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]uint64, len(seedV2Values))
	for i, v := range seedV2Values {
		raw[i] = uint64(v)
	}
	want := buildV2(math.Float64bits(seedTimestamp), raw, seedV2Metadata, "")
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode = %q\nwant %q", got, want)
	}
	// Spot-check the layout byte by byte: 11-byte magic, 4-byte CRCs and count, 8-byte fields.
	if string(got[:11]) != "DATASOURCES" || !bytes.Equal(got[19:23], []byte{0, 0, 0, 4}) ||
		!bytes.Equal(got[23:31], []byte{0x41, 0xd3, 0xf6, 0x7e, 0xb1, 0x40, 0, 0}) ||
		!bytes.Equal(got[31:39], []byte{0, 0, 0, 0, 0, 0x10, 0, 0}) ||
		!bytes.Equal(got[47:55], []byte{0x40, 0x50, 0x15, 0x1e, 0xb8, 0x51, 0xeb, 0x85}) {
		t.Errorf("layout: % x", got[:63])
	}
	golden(t, "v2_seed.bin", got)

	var r Reader
	if err := r.Read(got); err != nil {
		t.Fatalf("Read: %v", err)
	}
	checkSeedV2(t, &r)
	if ts := r.Timestamp().Unix(); ts != seedTimestamp {
		t.Errorf("Timestamp = %d; want %d", ts, seedTimestamp)
	}
}

func checkSeedV2(t *testing.T, r *Reader) {
	t.Helper()
	if r.Protocol() != V2 {
		t.Errorf("Protocol = %d; want 2", r.Protocol())
	}
	dss := r.Datasources()
	if len(dss) != len(seedV2Datasources) {
		t.Fatalf("Datasources = %+v", dss)
	}
	for i := range dss {
		if !sameDatasources(dss[i:i+1], seedV2Datasources[i:i+1]) {
			t.Errorf("Datasources[%d] = %+v; want %+v", i, dss[i], seedV2Datasources[i])
		}
		if r.Values()[i] != seedV2Values[i] {
			t.Errorf("Values[%d] = %#x; want %#x", i, r.Values()[i], seedV2Values[i])
		}
	}
}

// seedV1JSON is the seed's v1 example exactly as printed (not valid JSON).
const seedV1JSON = `{
  "timestamp": 1339685573,
  "data_sources": {
    "cpu-temp-cpu0": {
      "description": "Temperature of CPU 0",
      "type": "absolute",
      "units": "degC",
      "value": "64.33"
      "value_type": "float",
    },
    "cpu-temp-cpu1": {
      "description": "Temperature of CPU 1",
      "type": "absolute",
      "units": "degC",
      "value": "62.14"
      "value_type": "float",
    }
  }
}`

func v1File(json string) []byte {
	sum := md5.Sum([]byte(json))
	return fmt.Appendf(nil, "DATASOURCES\n%08x\n%s\n%s\n", len(json), hex.EncodeToString(sum[:]), json)
}

func TestGoldenV1Seed(t *testing.T) {
	// 1. The seed's file byte for byte. Its header (length 0x1e4, md5 dba4bf7a...) does not
	// describe the 405-byte example printed under it, so a reader must refuse it.
	seedFile := []byte("DATASOURCES\n000001e4\ndba4bf7a84b6d11d565d19ef91f7906e\n" + seedV1JSON + "\n")
	golden(t, "v1_seed_verbatim.txt", seedFile)
	var r Reader
	if err := r.Read(seedFile); !errors.Is(err, ErrTruncated) {
		t.Errorf("Read(seed verbatim) = %v; want ErrTruncated (0x1e4 = 484 bytes announced, 406 present)", err)
	}
	padded := append(bytes.Clone(seedFile), strings.Repeat(" ", 100)...)
	if err := r.Read(padded); !errors.Is(err, ErrChecksum) {
		t.Errorf("Read(seed padded) = %v; want ErrChecksum", err)
	}

	// 2. The same JSON with a correct length and MD5: the framing passes, the JSON does not
	// (missing comma after "value"), as with xcp-rrdd.
	framed := v1File(seedV1JSON)
	golden(t, "v1_seed_framed.txt", framed)
	err := r.Read(framed)
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "offset 195") {
		t.Errorf("Read(seed with true checksum) = %v; want ErrPayload at offset 195", err)
	}

	// 3. The example with its commas fixed reads, "data_sources" accepted as "datasources".
	fixed := strings.NewReplacer(`"64.33"`, `"64.33",`, `"62.14"`, `"62.14",`, `"float",`, `"float"`).Replace(seedV1JSON)
	file := v1File(fixed)
	golden(t, "v1_seed_fixed.txt", file)
	if err := r.Read(file); err != nil {
		t.Fatalf("Read(fixed seed) = %v", err)
	}
	dss, vals := r.Datasources(), r.Values()
	if r.Protocol() != V1 || len(dss) != 2 || dss[0].Name != "cpu-temp-cpu0" || dss[1].Name != "cpu-temp-cpu1" {
		t.Fatalf("Datasources = %+v", dss)
	}
	for i, want := range []float64{64.33, 62.14} {
		d := dss[i]
		if d.ValueType != Float || d.Type != Absolute || d.Units != "degC" || d.Owner != "host" || d.Default || !math.IsInf(d.Min, -1) || !math.IsInf(d.Max, 1) {
			t.Errorf("Datasources[%d] = %+v", i, d)
		}
		if vals[i].Float() != want {
			t.Errorf("Values[%d] = %v; want %v", i, vals[i].Float(), want)
		}
	}
	if r.Timestamp().Unix() != seedTimestamp {
		t.Errorf("Timestamp = %v", r.Timestamp())
	}
}

func TestGoldenV1Encoder(t *testing.T) {
	dss := seedV2Datasources[2:]
	enc, err := NewEncoder(V1, dss)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.Encode(time.Unix(seedTimestamp, 0), seedV2Values[2:])
	if err != nil {
		t.Fatal(err)
	}
	json := `{"datasources": {` +
		`"cpu-temp-cpu0": {"default": "true", "description": "Temperature of CPU 0", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "degC", "value": "64.33", "value_type": "float"}, ` +
		`"cpu-temp-cpu1": {"default": "true", "description": "Temperature of CPU 1", "max": "inf", "min": "-inf", "owner": "host", "type": "absolute", "units": "degC", "value": "62.14", "value_type": "float"}}, ` +
		`"timestamp": 1339685573}`
	if want := v1File(json); !bytes.Equal(got, want) {
		t.Fatalf("Encode = %q\nwant %q", got, want)
	}
	golden(t, "v1_encoder.txt", got)
	var r Reader
	if err := r.Read(got); err != nil {
		t.Fatal(err)
	}
	if len(r.Values()) != 2 || r.Values()[0].Float() != 64.33 || r.Values()[1].Float() != 62.14 {
		t.Errorf("Values = %v", r.Values())
	}
}

// Files as XAPI's plugin libraries write them (see the package documentation).
func TestGoldenLibraries(t *testing.T) {
	pyMeta := `{"datasources": {"a_count": {"default": "true", "description": "", "max": "inf", "min": "-inf", "owner": "vm 1b7e2a3c-0000-4000-8000-000000000001", "type": "derive", "units": "", "value_type": "int64"}, ` +
		`"b_temp": {"default": "true", "description": "t", "max": Infinity, "min": "0.0", "owner": "host", "type": "gauge", "units": "degC", "value_type": "float"}}}`
	ocamlMeta := `{"datasources":{"sr_io":{"description":"IO","owner":"sr 9f0c","value":"12.00","value_type":"float","type":"gauge","default":"true","units":"MiB/s","min":"0.00","max":"inf"}}}`
	cMeta := "{\n    \"datasources\": {\n        \"c_src\": {\n            \"description\": \"from C\",\n            \"units\": \"\",\n            \"min\": \"-inf\",\n            \"max\": \"inf\",\n            \"default\": \"true\",\n            \"owner\": \"vm\",\n            \"value_type\": \"int64\",\n            \"type\": \"absolute\"\n        }\n    }\n}\x00"
	tsDouble := math.Float64bits(1700000000.5)
	cases := []struct {
		name  string
		file  []byte
		ts    int64
		check func(t *testing.T, dss []Datasource, vals []Value)
	}{
		{"v2_python.bin", buildV2(tsDouble, []uint64{42, math.Float64bits(36.6)}, pyMeta, "stale bytes of a longer earlier write"), 1700000000,
			func(t *testing.T, dss []Datasource, vals []Value) {
				if dss[0].Owner != "vm 1b7e2a3c-0000-4000-8000-000000000001" || dss[0].Type != Derive || vals[0].Int() != 42 {
					t.Errorf("a_count = %+v %d", dss[0], vals[0].Int())
				}
				if dss[1].Min != 0 || !math.IsInf(dss[1].Max, 1) || dss[1].Type != Gauge || vals[1].Float() != 36.6 {
					t.Errorf("b_temp = %+v %v", dss[1], vals[1].Float())
				}
			}},
		{"v2_ocaml.bin", buildV2(1700000000, []uint64{math.Float64bits(12)}, ocamlMeta, strings.Repeat("\x00", 64)), 1700000000,
			func(t *testing.T, dss []Datasource, vals []Value) {
				if dss[0].Owner != "sr 9f0c" || dss[0].Min != 0 || dss[0].Units != "MiB/s" || vals[0].Float() != 12 {
					t.Errorf("sr_io = %+v %v", dss[0], vals[0].Float())
				}
			}},
		{"v2_c.bin", buildV2(1700000000, []uint64{uint64(1<<64 - 5)}, cMeta, ""), 1700000000,
			func(t *testing.T, dss []Datasource, vals []Value) {
				if dss[0].Owner != "vm" || dss[0].Description != "from C" || vals[0].Int() != -5 {
					t.Errorf("c_src = %+v %d", dss[0], vals[0].Int())
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			golden(t, c.name, c.file)
			var r Reader
			if err := r.Read(c.file); err != nil {
				t.Fatalf("Read: %v", err)
			}
			if got := r.Timestamp().Unix(); got != c.ts {
				t.Errorf("Timestamp = %d; want %d", got, c.ts)
			}
			c.check(t, r.Datasources(), r.Values())
		})
	}
}
