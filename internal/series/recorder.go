package series

// Recorder is a Sink that keeps the latest value of every series it is given. It is meant for
// collector tests. It is not safe for concurrent use.
type Recorder struct {
	refs   map[string]*Ref
	Values map[string]uint64 // by Key
	States map[string]RecordedState
	// Problems holds the reasons reported per source, in order.
	Problems map[string][]string
}

// RecordedState is what a Recorder keeps of a State series.
type RecordedState struct {
	Since int64
	Text  string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{refs: map[string]*Ref{}, Values: map[string]uint64{}, States: map[string]RecordedState{}, Problems: map[string][]string{}}
}

// Series implements Sink.
func (r *Recorder) Series(labels Labels, kind Kind) *Ref {
	key := labels.Key()
	if ref, ok := r.refs[key]; ok {
		return ref
	}
	ref := &Ref{Labels: labels, Key: key, Kind: kind, ID: int32(len(r.refs))}
	r.refs[key] = ref
	return ref
}

// Put implements Sink.
func (r *Recorder) Put(ref *Ref, bits uint64) { r.Values[ref.Key] = bits }

// PutState implements Sink.
func (r *Recorder) PutState(ref *Ref, since int64, text string) {
	r.States[ref.Key] = RecordedState{since, text}
}

// Refs returns every series registered so far, by Key.
func (r *Recorder) Refs() map[string]*Ref { return r.refs }

// Problem implements Sink.
func (r *Recorder) Problem(source, reason string) {
	r.Problems[source] = append(r.Problems[source], reason)
}

// Discard is a Sink that keeps nothing: benchmarks use it to measure collectors alone. Series
// returns a fresh Ref numbered in call order. Not safe for concurrent use.
type Discard struct{ n int32 }

// Series implements Sink.
func (d *Discard) Series(l Labels, k Kind) *Ref {
	d.n++
	return &Ref{Labels: l, Kind: k, ID: d.n}
}

// Put implements Sink.
func (d *Discard) Put(*Ref, uint64) {}

// PutState implements Sink.
func (d *Discard) PutState(*Ref, int64, string) {}

// Problem implements Sink.
func (d *Discard) Problem(string, string) {}
