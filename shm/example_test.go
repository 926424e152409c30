package shm_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/shm"
)

// An application declares its metrics, starts the collection and updates the metrics.
func ExampleCollection() {
	dir, _ := os.MkdirTemp("", "cantal")
	defer os.RemoveAll(dir)

	// Normally Options{} takes the path from CANTAL_PATH.
	coll := shm.NewCollection(shm.Options{Path: filepath.Join(dir, "myapp")})
	requests := shm.Must(coll.Counter(map[string]string{"metric": "requests.number"}))
	duration := shm.Must(coll.Counter(map[string]string{"metric": "requests.duration", "unit": "ms"}))
	queue := shm.Must(coll.Integer(map[string]string{"metric": "queue.length"}))
	sql := shm.Must(coll.State(map[string]string{"metric": "sql.request"}, 0))

	requests.Inc() // metrics work before Start; the value is carried over
	if err := coll.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer coll.Close()

	requests.Inc()
	duration.Add(260)
	queue.Set(3)
	sql.Enter("SELECT * FROM users")
	sql.Exit()

	meta, _ := os.ReadFile(coll.Path() + ".meta")
	fmt.Print(string(meta))
	fmt.Println(requests.Get(), duration.Get(), queue.Get())
	// Output:
	// level 8 signed: {"metric": "queue.length"}
	// counter 8: {"metric": "requests.duration", "unit": "ms"}
	// counter 8: {"metric": "requests.number"}
	// pad 40
	// state 64: {"metric": "sql.request"}
	// 2 260 3
}

// ParseMeta and the Entry methods decode files read by any means.
func ExampleParseMeta() {
	meta := "counter 8: {\"metric\": \"requests.number\"}\n" +
		"counter 8: {\"metric\": \"requests.duration\", \"unit\": \"ms\"}\n" +
		"level 8 unsigned: {\"metric\": \"future\"}\n"
	// Host byte order: 97, 25191 and the 8 bytes of the skipped entry.
	values := binary.NativeEndian.AppendUint64(nil, 97)
	values = binary.NativeEndian.AppendUint64(values, 25191)
	values = binary.NativeEndian.AppendUint64(values, 0)
	layout, err := shm.ParseMeta("myapp.meta", []byte(meta))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := layout.CheckValues(values); err != nil {
		fmt.Println(err)
		return
	}
	for i := range layout.Entries {
		e := &layout.Entries[i]
		fmt.Println(e.Labels["metric"], e.Kind, e.Counter(values))
	}
	fmt.Println(layout.Skipped)
	// Output:
	// requests.number counter 97
	// requests.duration counter 25191
	// [myapp.meta:3: level 8 unsigned is not read]
}

// A Reader re-reads one application's files cheaply, scan after scan.
func ExampleReader() {
	dir, _ := os.MkdirTemp("", "cantal")
	defer os.RemoveAll(dir)
	base := filepath.Join(dir, "myapp")
	coll := shm.NewCollection(shm.Options{Path: base})
	shm.Must(coll.Counter(map[string]string{"metric": "requests"})).Add(5)
	shm.Must(coll.State(map[string]string{"metric": "phase"}, 0)).EnterAt("loading", time.UnixMilli(1700000000000))
	if err := coll.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer coll.Close()

	r := shm.NewReader(base, shm.ReaderOptions{})
	defer r.Close()
	for scan := range 2 {
		snap, err := r.Read()
		if err != nil {
			fmt.Println(err) // errors.Is(err, shm.ErrNotReady): try again at the next scan
			return
		}
		fmt.Println("scan", scan, "layout changed:", snap.Changed)
		for i := range snap.Layout.Entries {
			e := &snap.Layout.Entries[i]
			switch e.Kind {
			case shm.KindState:
				since, text := e.State(snap.Values)
				fmt.Println(" ", e.Labels["metric"], since, string(text))
			default:
				fmt.Println(" ", e.Labels["metric"], e.Bits(snap.Values))
			}
		}
	}
	// Output:
	// scan 0 layout changed: true
	//   requests 5
	//   phase 1700000000000 loading
	// scan 1 layout changed: false
	//   requests 5
	//   phase 1700000000000 loading
}
