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
// # Reading .meta as the original agent does
//
// ParseMeta follows the original Cantal agent (cantal_values' Metadata::read and read_data, the
// agent's Key::from_json) entry by entry. An entry the original drops is not read and is listed
// in Layout.Skipped with its reason, which the agent shows among its scan problems; the rest of
// the file is read. Rule by rule:
//
//	Metadata line                        original agent               this package
//	-----------------------------------  ---------------------------  ------------------------
//	{"metric": "x", "shard": 1}          entry dropped                entry skipped, reported
//	(any value not a string: number,
//	true, false, null, array, object)
//	[...], "text", 1 (not an object)     entry dropped                entry skipped, reported
//	{}                                   read, agent's labels only    read, no labels of its own
//	two entries with one label set       last one's value kept        last read, earlier
//	                                                                  skipped, reported
//	{"a": "b", "a": "c"}                 last value                   last value
//	state 12 (any state over 8 bytes)    read                         read
//	state 8 and smaller, counter 0       not read, place kept         skipped, reported
//	pad 8: {json}, pad 8 x               padding, rest ignored        padding, rest ignored
//	counter 8 x, level 8 signed x        read, parameter ignored      read, parameter ignored
//	lines ending in CR, CRLF files       read (each line trimmed)     read
//	empty file                           no entries                   empty layout
//	state with time 0                    its text kept                text returned, time 0
//	invalid JSON, blank line, "level 8"  whole file refused           whole file refused
//	without kind, no TYPE SIZE
//
// Deliberate differences, each where the original refuses the whole file and this package keeps
// the rest: a counter or level of 256..65535 bytes and a level of an unknown kind are skipped,
// not fatal. Sizes above 65535 refuse the file in both. Limits the original lacks, against
// hostile files: a .meta of at most ReaderOptions.MaxMetaSize bytes, JSON nested at most 64
// deep (deeper refuses the file), and at most 64 skipped entries listed, then one line counting
// the rest.
//
// This package imports nothing outside the standard library and golang.org/x/sys/unix. It
// runs on Linux and other Unix systems.
package shm
