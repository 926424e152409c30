package apiwire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/agent"
	"github.com/cantal-go/cantal/internal/apiwire"
)

// jsonPaths lists the JSON member paths a struct type encodes (nested structs as a.b).
func jsonPaths(t reflect.Type, prefix string, out map[string]reflect.Kind) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Struct && ft.PkgPath() == "" {
			jsonPaths(ft, prefix+name+".", out)
			continue
		}
		out[prefix+name] = ft.Kind()
	}
}

// TestStatusHead: every member of apiwire.StatusHead is one agent.Status writes (same path,
// a number where it writes a number), and a status the agent encodes decodes into it.
func TestStatusHead(t *testing.T) {
	have := map[string]reflect.Kind{}
	jsonPaths(reflect.TypeOf(agent.Status{}), "", have)
	want := map[string]reflect.Kind{}
	jsonPaths(reflect.TypeOf(apiwire.StatusHead{}), "", want)
	isNum := func(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Float64 }
	for path, k := range want {
		hk, ok := have[path]
		switch {
		case !ok:
			t.Errorf("StatusHead has %s; agent.Status does not write it", path)
		case isNum(k) != isNum(hk):
			t.Errorf("StatusHead.%s is a %v; agent.Status writes a %v", path, k, hk)
		}
	}
	var s agent.Status
	s.NodeID, s.NodeName, s.UptimeS, s.ClusterName = "4f2a", "web-1", 12.5, "c"
	s.LastScan.DurationMs, s.LastScan.Scans, s.Counts.Processes = 3.25, 2, 310
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var h apiwire.StatusHead
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if h.NodeID != "4f2a" || h.NodeName != "web-1" || h.UptimeS != 12.5 || h.ClusterName != "c" ||
		h.LastScan.DurationMs != 3.25 || h.LastScan.Scans != 2 || h.Counts.Processes != 310 {
		t.Errorf("decoded %+v from %s", h, b)
	}
}
