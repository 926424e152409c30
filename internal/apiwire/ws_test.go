package apiwire

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestWirePoints(t *testing.T) {
	var m WSFrame
	msg := `{"type":"history","id":"a","series":[{"labels":{"metric":"m"},"kind":"float","points":[ [1700000000000, 2.5] ,[1700000001000,"NaN"],[1700000002000,"+Inf"],[1700000003000,"-Inf"],[1.700000004e12,-1e-3],[1700000005000,1e999]]}]}`
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatal(err)
	}
	got := m.Series[0].Points
	want := []WSPoint{{1700000000000, 2.5}, {1700000001000, math.NaN()}, {1700000002000, math.Inf(1)}, {1700000003000, math.Inf(-1)}, {1700000004000, -1e-3}, {1700000005000, math.Inf(1)}}
	if len(got) != len(want) {
		t.Fatalf("points %v; want %v", got, want)
	}
	for i := range want {
		if got[i].TS != want[i].TS || got[i].Value != want[i].Value && !(math.IsNaN(got[i].Value) && math.IsNaN(want[i].Value)) {
			t.Errorf("point %d = %v; want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{`[[1]]`, `[[1,2,3]]`, `[["x",1]]`, `[[1,"x"]]`, `[[1.5,1]]`, `[{"ts":1}]`, `[[1,true]]`, `{"a":1}`, `"x"`} {
		var ps WSPoints
		if err := json.Unmarshal([]byte(bad), &ps); err == nil {
			t.Errorf("%s decoded as %v; want an error", bad, ps)
		}
	}
	var ps WSPoints
	if err := json.Unmarshal([]byte(`null`), &ps); err != nil || ps != nil {
		t.Errorf("null: %v, %v", ps, err)
	}
}

// FuzzWireMessage: a peer's message decodes or fails with an error, never panics; the points
// of one that decodes, written again as the agent writes them, decode to the same points.
func FuzzWireMessage(f *testing.F) {
	f.Add([]byte(`{"type":"history","id":"a","series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2.5],[2,"NaN"]]}]}`))
	f.Add([]byte(`{"type":"update","id":"a","ts":5,"series":[{"labels":{"metric":"m"},"kind":"counter","value":18446744073709551615,"ts":5,"rate":1.5}]}`))
	f.Add([]byte(`{"type":"history","series":[{"points":[[1e3 , -0],[ 2 ,1E+2]]}]}`))
	f.Add([]byte(`{"type":"error","id":"a","error":"bad match"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m WSFrame
		if json.Unmarshal(data, &m) != nil {
			return
		}
		for _, ws := range m.Series {
			ws.Sample()
			b := []byte{'['}
			for i, p := range ws.Points {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = strconv.AppendInt(b, p.TS, 10)
				b = append(b, ',')
				b = series.AppendFloat(b, p.Value)
				b = append(b, ']')
			}
			b = append(b, ']')
			var again WSPoints
			if err := json.Unmarshal(b, &again); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			for i, p := range again {
				q := ws.Points[i]
				if p.TS != q.TS || p.Value != q.Value && !(math.IsNaN(p.Value) && math.IsNaN(q.Value)) {
					t.Fatalf("point %d: %v, again %v", i, q, p)
				}
			}
		}
	})
}

// TestWireNonFiniteRate: an update whose rate or value is one of the strings the API writes
// for non-finite numbers decodes (with *float64 a "NaN" rate failed the whole message, and the
// session with it); a counter above 2^53 keeps its exact bits.
func TestWireNonFiniteRate(t *testing.T) {
	var m WSFrame
	msg := `{"type":"update","id":"a","ts":5,"series":[` +
		`{"labels":{"metric":"c"},"kind":"counter","value":18446744073709551615,"ts":5,"rate":"NaN"},` +
		`{"labels":{"metric":"f"},"kind":"float","value":"-Inf","ts":5},` +
		`{"labels":{"metric":"s"},"kind":"state","value":"NaN","ts":5,"text":"NaN","since":3}]}`
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatal(err)
	}
	c, _ := m.Series[0].Sample()
	if c.Bits != math.MaxUint64 || !c.HasRate || !math.IsNaN(c.Rate) {
		t.Errorf("counter = %+v; want bits 2^64-1 and a NaN rate", c)
	}
	if f, v := m.Series[1].Sample(); !math.IsInf(v, -1) || !math.IsInf(math.Float64frombits(f.Bits), -1) || f.HasRate {
		t.Errorf("float = %+v, %v; want -Inf and no rate", f, v)
	}
	if s, _ := m.Series[2].Sample(); s.Text != "NaN" || s.Since != 3 || s.Bits != 0 {
		t.Errorf("state = %+v; want text NaN since 3", s)
	}
}

// TestWSRequestBytes: a request encodes as the map remote wrote before WSRequest (keys in
// encoding/json's map order, absent members left out), and decodes back.
func TestWSRequestBytes(t *testing.T) {
	for _, c := range []struct {
		req WSRequest
		was map[string]string
	}{
		{WSRequest{Type: "subscribe", ID: "a<1>", Match: `{metric=~"x&y"}`, History: "5m0s", Fn: "rate"},
			map[string]string{"type": "subscribe", "id": "a<1>", "match": `{metric=~"x&y"}`, "history": "5m0s", "fn": "rate"}},
		{WSRequest{Type: "subscribe", ID: "b", Match: "m", Scope: "cluster"},
			map[string]string{"type": "subscribe", "id": "b", "match": "m", "scope": "cluster"}},
		{WSRequest{Type: "unsubscribe", ID: "a"}, map[string]string{"type": "unsubscribe", "id": "a"}},
	} {
		got, _ := json.Marshal(c.req)
		want, _ := json.Marshal(c.was)
		if string(got) != string(want) {
			t.Errorf("%+v encodes as %s; want %s", c.req, got, want)
		}
		var back WSRequest
		if err := json.Unmarshal(got, &back); err != nil || back != c.req {
			t.Errorf("%s decodes as %+v (%v)", got, back, err)
		}
	}
}
