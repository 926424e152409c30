package apiwire_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// TestProcessesFields: fields= keeps exactly the keys asked for, with the values the whole row
// has, written in alphabetical order; every key of ProcessFields is a key the whole row writes,
// in that order; a projected answer decodes into rows whose other members are zero.
func TestProcessesFields(t *testing.T) {
	row := apiwire.Process{PID: 7, PPID: 1, UID: 1000, Name: "app", Cmdline: []string{"app", "-v"}, State: "S",
		StartTime: 5, Threads: 3, CPUUser: 1.5, CPUSystem: 0.5, CPUPercent: 12.5, RSS: 4096, VSZ: 8192,
		Swap: 1, ReadBytes: 2, WriteBytes: 3, Cgroup: "/x", AppName: "a", Metrics: true}
	b, _ := json.Marshal(apiwire.ProcessesAnswer{Processes: []apiwire.Process{row}, Total: 1})
	var whole struct {
		Processes []map[string]any
	}
	json.Unmarshal(b, &whole)
	var keys []string
	dec := json.NewDecoder(bytesReader(b[len(`{"processes":[`):]))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if !slices.Equal(keys, apiwire.ProcessFields) {
		t.Errorf("a whole row writes %v; ProcessFields are %v", keys, apiwire.ProcessFields)
	}
	b, _ = json.Marshal(apiwire.ProcessesAnswer{Processes: []apiwire.Process{row}, Total: 1, Fields: apiwire.ProcessFields})
	var all struct {
		Processes []map[string]any
	}
	json.Unmarshal(b, &all)
	if !reflect.DeepEqual(all.Processes[0], whole.Processes[0]) {
		t.Errorf("every field projected:\n%v\nwant the whole row:\n%v", all.Processes[0], whole.Processes[0])
	}
	b, _ = json.Marshal(apiwire.ProcessesAnswer{Processes: []apiwire.Process{row}, Total: 9, Fields: []string{"pid", "name", "cpu_percent", "rss"}})
	if want := `{"processes":[{"cpu_percent":12.5,"name":"app","pid":7,"rss":4096}],"total":9}`; string(b) != want {
		t.Errorf("four fields: %s; want %s", b, want)
	}
	var back apiwire.ProcessesAnswer
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if want := (apiwire.Process{PID: 7, Name: "app", CPUPercent: 12.5, RSS: 4096}); back.Total != 9 || len(back.Processes) != 1 || !reflect.DeepEqual(back.Processes[0], want) {
		t.Errorf("decoded %+v; want one row %+v, total 9", back, want)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
