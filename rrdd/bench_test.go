package rrdd

import (
	"fmt"
	"testing"
	"time"
)

func benchFiles(b *testing.B, n int, sameMeta bool) [2][]byte {
	var files [2][]byte
	for f := range files {
		dss := make([]Datasource, n)
		vals := make([]Value, n)
		for i := range dss {
			vt := Int64
			if i%2 == 1 {
				vt = Float
			}
			dss[i] = NewDatasource(fmt.Sprintf("datasource_%d", i), vt)
			dss[i].Description, dss[i].Units, dss[i].Default = "a typical description", "B", true
			if !sameMeta {
				dss[i].Description += fmt.Sprint(f) // a different metadata checksum
			}
			vals[i] = IntValue(int64(i*1000 + f))
		}
		files[f] = encodeV2(b, dss, int64(1700000000+f), vals...)
	}
	return files
}

// BenchmarkReadValuesOnly is the steady state: every read is an update whose metadata checksum
// is unchanged, so only the data CRC is checked and the values decoded.
func BenchmarkReadValuesOnly(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchRead(b, benchFiles(b, n, true), n, 1)
		})
	}
}

// BenchmarkReadReparse is the cost when every read brings new metadata.
func BenchmarkReadReparse(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchRead(b, benchFiles(b, n, false), n, 0)
		})
	}
}

func benchRead(b *testing.B, files [2][]byte, n int, wantReparses uint64) {
	var r Reader
	if err := r.Read(files[1]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Read(files[i&1]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/datasource")
	if wantReparses == 1 && r.Stats().Reparses != 1 {
		b.Fatalf("%d reparses in the values-only benchmark", r.Stats().Reparses)
	}
}

func BenchmarkEncodeV2(b *testing.B) {
	dss := make([]Datasource, 100)
	vals := make([]Value, 100)
	for i := range dss {
		dss[i] = NewDatasource(fmt.Sprintf("datasource_%d", i), Int64)
	}
	enc, err := NewEncoder(V2, dss)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		vals[0] = IntValue(int64(i))
		if _, err := enc.Encode(time.Unix(int64(i), 0), vals); err != nil {
			b.Fatal(err)
		}
	}
}
