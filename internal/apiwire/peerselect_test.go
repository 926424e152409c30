package apiwire

import (
	"bytes"
	"slices"
	"testing"
)

// TestPeerSelectRoundTrip: an answer written with the Append functions decodes to the same
// series; a truncated one, trailing bytes, or a missing magic are errors.
func TestPeerSelectRoundTrip(t *testing.T) {
	in := [][]PeerSeries{
		{{Labels: []string{"__name__", "up", "node", "a"}, Chunks: [][]byte{{0, 1, 2}, {3}}}, {Labels: []string{"x", ""}}},
		{},
		{{}},
	}
	b := AppendPeerSelectHeader(nil)
	for _, list := range in {
		b = AppendPeerSelectCount(b, len(list))
		for _, s := range list {
			b = AppendPeerSeries(b, s)
		}
	}
	out, err := DecodePeerSelect(b, len(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if len(out[i]) != len(in[i]) {
			t.Fatalf("selector %d: %d series, want %d", i, len(out[i]), len(in[i]))
		}
		for j := range in[i] {
			if !slices.Equal(out[i][j].Labels, in[i][j].Labels) || !slices.EqualFunc(out[i][j].Chunks, in[i][j].Chunks, bytes.Equal) {
				t.Errorf("selector %d series %d: %+v, want %+v", i, j, out[i][j], in[i][j])
			}
		}
	}
	for n := len(PeerSelectMagic); n < len(b); n++ {
		if _, err := DecodePeerSelect(b[:n], len(in)); err == nil {
			t.Errorf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
	if _, err := DecodePeerSelect(append(slices.Clip(b), 0), len(in)); err == nil {
		t.Error("a trailing byte: no error")
	}
	if _, err := DecodePeerSelect([]byte("<html>"), 1); err != ErrNotPeerSelect {
		t.Errorf("no magic: %v, want ErrNotPeerSelect", err)
	}
}

// FuzzDecodePeerSelect: whatever a peer sends, decoding it fails or gives series that, written
// back, are the bytes read; it never allocates beyond what the bytes can hold (counts are
// checked against the bytes left).
func FuzzDecodePeerSelect(f *testing.F) {
	b := AppendPeerSelectHeader(nil)
	b = AppendPeerSelectCount(b, 1)
	b = AppendPeerSeries(b, PeerSeries{Labels: []string{"a", "b"}, Chunks: [][]byte{{1, 2}}})
	f.Add(b, 1)
	f.Add([]byte(PeerSelectMagic+"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), 1)
	f.Add([]byte(PeerSelectMagic+"\x00\x00"), 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > MaxPeerSelectors {
			return
		}
		out, err := DecodePeerSelect(b, n)
		if err != nil {
			return
		}
		re := AppendPeerSelectHeader(nil)
		for _, list := range out {
			re = AppendPeerSelectCount(re, len(list))
			for _, s := range list {
				re = AppendPeerSeries(re, s)
			}
		}
		// Uvarints may be written longer than needed: the decoded form re-encodes, shortest.
		again, err := DecodePeerSelect(re, n)
		if err != nil || len(again) != len(out) {
			t.Fatalf("re-encoded answer: %v", err)
		}
	})
}

// FuzzParsePeerSelector: a selector parameter reads or fails; one that reads writes back
// to the same selector.
func FuzzParsePeerSelector(f *testing.F) {
	f.Add(`1700000000000,1700000060000,p,{__name__="up"}`)
	f.Add(`-5,7,l,{a=~"x,y"}`)
	f.Add(`1,2,q,{}`)
	f.Fuzz(func(t *testing.T, p string) {
		s, err := ParsePeerSelector(p)
		if err != nil {
			return
		}
		s2, err := ParsePeerSelector(s.Param())
		if err != nil || s2 != s {
			t.Fatalf("%q → %+v → %q → %+v, %v", p, s, s.Param(), s2, err)
		}
	})
}

// TestPeerPartRoundTrip: a peer part written with the Append functions decodes to the same
// series, warnings and infos; truncated, trailing bytes or no magic are errors.
func TestPeerPartRoundTrip(t *testing.T) {
	series := []PeerSeries{{Labels: []string{"node", "a"}, Chunks: [][]byte{{0, 1, 2}}}, {Labels: []string{"node", "b"}}}
	b := AppendPeerSelectCount(AppendPeerSelectHeader(nil), len(series))
	for _, s := range series {
		b = AppendPeerSeries(b, s)
	}
	b = AppendPeerStrings(AppendPeerStrings(b, []string{"PromQL warning: w"}), []string{"PromQL info: i", ""})
	out, warn, info, err := DecodePeerPart(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || !slices.Equal(out[0].Labels, series[0].Labels) || !bytes.Equal(out[0].Chunks[0], series[0].Chunks[0]) ||
		!slices.Equal(warn, []string{"PromQL warning: w"}) || !slices.Equal(info, []string{"PromQL info: i", ""}) {
		t.Errorf("decoded %+v %q %q", out, warn, info)
	}
	for n := len(PeerSelectMagic); n < len(b); n++ {
		if _, _, _, err := DecodePeerPart(b[:n]); err == nil {
			t.Errorf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
	if _, _, _, err := DecodePeerPart(append(slices.Clip(b), 0)); err == nil {
		t.Error("a trailing byte: no error")
	}
	if _, _, _, err := DecodePeerPart([]byte(`{"status":"success"}`)); err != ErrNotPeerSelect {
		t.Errorf("JSON: %v, want ErrNotPeerSelect", err)
	}
}

// FuzzDecodePeerPart: whatever a peer sends as its part, decoding it fails or gives what,
// written back, decodes again to as much.
func FuzzDecodePeerPart(f *testing.F) {
	b := AppendPeerSelectCount(AppendPeerSelectHeader(nil), 1)
	b = AppendPeerSeries(b, PeerSeries{Labels: []string{"a", "b"}, Chunks: [][]byte{{1, 2}}})
	f.Add(AppendPeerStrings(AppendPeerStrings(b, []string{"w"}), nil))
	f.Add([]byte(PeerSelectMagic + "\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, warn, info, err := DecodePeerPart(b)
		if err != nil {
			return
		}
		re := AppendPeerSelectCount(AppendPeerSelectHeader(nil), len(out))
		for _, s := range out {
			re = AppendPeerSeries(re, s)
		}
		re = AppendPeerStrings(AppendPeerStrings(re, warn), info)
		again, w2, i2, err := DecodePeerPart(re)
		if err != nil || len(again) != len(out) || !slices.Equal(w2, warn) || !slices.Equal(i2, info) {
			t.Fatalf("re-encoded part: %v", err)
		}
	})
}
