// Package shm implements the Cantal shared-memory protocol, both the side of the application
// that publishes metrics and the side of the agent (or the cantal CLI) that reads them.
//
// An application publishes its metrics in two files named after a base path, normally the
// CANTAL_PATH environment variable through which the agent discovers it: BASE.meta, one line
// per value ("counter 8: {\"metric\": \"requests\"}", "level 8 signed: ...", "level 8 float:
// ...", "state 64: ...", "pad N"), and BASE.values, the values themselves in host byte order,
// laid out in the same order and updated in place through a shared memory mapping. Readers
// poll the values file; no call into the application is ever needed.
//
// # Writing
//
// Declare metrics on a Collection, Start it, and update the metrics from anywhere:
//
//	coll := shm.NewCollection(shm.Options{}) // base path from CANTAL_PATH
//	requests := shm.Must(coll.Counter(map[string]string{"metric": "requests"}))
//	if err := coll.Start(); err != nil { ... }
//	defer coll.Close()
//	requests.Inc()
//
// After Start, Counter.Inc is one atomic add on the shared memory. The files are written as the
// existing clients write them (Python cantal, Rust libcantal, Go cantal-go): .values first and
// then .meta, each through a temporary file and a rename, with JSON metadata in Python's
// json.dumps(sort_keys=True) format, so the original Cantal agent reads them too.
//
// # Reading
//
// ParseMeta parses a .meta file into a Layout; Entry.Bits and Entry.State decode values from
// the .values bytes without allocating. A Reader does both for one application and keeps the
// steady-state cost of re-reading it to three system calls: it never decodes values with a
// layout they do not belong to, even while the application restarts and replaces its files.
//
// This package imports nothing outside the standard library and golang.org/x/sys/unix. It
// runs on Linux and other Unix systems.
package shm
