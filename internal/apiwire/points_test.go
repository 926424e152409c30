package apiwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// decodeGeneric decodes a point list with Point.UnmarshalJSON only (the definition).
func decodeGeneric(b []byte) ([]Point, error) {
	var pts []Point
	err := json.Unmarshal(b, &pts)
	return pts, err
}

func appendPointList(pts []Point) []byte {
	b := []byte{'['}
	for i, p := range pts {
		if i > 0 {
			b = append(b, ',')
		}
		b = p.AppendJSON(b)
	}
	return append(b, ']')
}

var pointListSeeds = []string{
	`[]`, ` [ ] `, `[[1,2]]`, `[[1790000000000,0],[1790000001000,1.5e-07],[1790000002000,"NaN"],[3,"+Inf"],[4,"-Inf"],[5,"Inf"],[6,null]]`,
	`[[1, 2.50]]`, `[[1,1E3]]`, `[[1,-0]]`, `[[-0,1]]`, `[[1,1e999]]`, `[[1.5,2]]`, `[[1,2,3]]`, `[[1]]`, `[[99999999999999999999,1]]`,
	`[[1,"N\u0061N"]]`, `[[1,"x"]]`, `[[1,true]]`, `null`, `[1]`, `[[1,2]`, `[[1,2]]x`, "[\n[1 ,\t2 ] ]", `[[1,01]]`, `[[1,1152921504606846983]]`,
}

// The fast reader of point lists accepts exactly what Point.UnmarshalJSON accepts and gives
// points that encode to the same bytes.
func TestPointListMatchesPoint(t *testing.T) {
	for _, s := range pointListSeeds {
		checkPointList(t, []byte(s))
	}
}

func FuzzPointList(f *testing.F) {
	for _, s := range pointListSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPointList(t, b) })
}

func checkPointList(t *testing.T, b []byte) {
	t.Helper()
	want, werr := decodeGeneric(b)
	var got pointList
	gerr := json.Unmarshal(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v; Point.UnmarshalJSON's %v", b, gerr, werr)
	}
	if werr != nil {
		return
	}
	if g, w := appendPointList(got), appendPointList(want); !bytes.Equal(g, w) {
		t.Fatalf("%q: encodes to %s; Point.UnmarshalJSON's to %s", b, g, w)
	}
	for i := range want {
		if got[i].TS != want[i].TS || got[i].Value.Valid != want[i].Value.Valid ||
			!(got[i].Value.F == want[i].Value.F || got[i].Value.F != got[i].Value.F && want[i].Value.F != want[i].Value.F) {
			t.Fatalf("%q: point %d is %+v; want %+v", b, i, got[i], want[i])
		}
	}
	if s, ok := scanPoints(b, nil); ok && len(s) != len(want) {
		t.Fatalf("%q: fast path read %d points; want %d", b, len(s), len(want))
	}
}

// A history answer decodes in one pass and encodes back to the bytes the agent wrote.
func TestHistoryAnswerRoundTrip(t *testing.T) {
	in := `{"series":[{"labels":{"metric":"m&m","node":"p<1>"},"kind":"counter","fn":"rate","points":[[1,0.5],[2,"NaN"],[3,1e+21]]},{"labels":{"metric":"x"},"kind":"float","points":[]}]}`
	var a HistoryAnswer
	if err := a.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	out, _ := a.MarshalJSON()
	if string(out) != in {
		t.Fatalf("re-encoded\n %s\nwant\n %s", out, in)
	}
	if err := a.UnmarshalJSON([]byte(`{"series":[{"labels":{},"points":[[1,"x"]]}]}`)); err == nil {
		t.Fatal("a point that is no number decoded")
	}
}
