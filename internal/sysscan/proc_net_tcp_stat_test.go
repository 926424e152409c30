package sysscan

import (
	"context"
	"maps"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// connectionStates returns the tcp.connection_states values r holds, by state label.
func connectionStates(r *series.Recorder) map[string]uint64 {
	got := map[string]uint64{}
	for key, ref := range r.Refs() {
		if v, ok := r.Values[key]; ok && ref.Labels["metric"] == "tcp.connection_states" {
			got[ref.Labels["state"]] = v
		}
	}
	return got
}

// TestTCPStatFromProcFixture: with Options.TCPStat, the machine collector on the fixture /proc
// (net/tcp and tcp6) puts tcp.connection_states as node_exporter's tcpstat collector counts
// them: the states that have sockets only, and the queues summed (from /proc, without the
// listeners' limits, which only netlink shows). Without the option there is no such series.
func TestTCPStatFromProcFixture(t *testing.T) {
	for _, on := range []bool{true, false} {
		m := NewMachine(Options{Proc: "testdata/proc", TCPStat: on})
		r := series.NewRecorder()
		if err := m.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		m.Close()
		got := connectionStates(r)
		want := map[string]uint64{
			// net/tcp: 2 listeners, 2 established, 1 time_wait; tcp6: 1 listener, 1 established.
			"listen": 3, "established": 3, "time_wait": 1,
			"rx_queued_bytes": 3, "tx_queued_bytes": 16,
		}
		if !on {
			want = map[string]uint64{}
		}
		if !maps.Equal(got, want) {
			t.Errorf("TCPStat %v: tcp.connection_states %v; want %v", on, got, want)
		}
	}
}

// TestTCPStatFromDiagFixture: fed a real netlink dump (testdata/inet_diag_dump), the counts and
// queues are node_exporter's: tx_queued_bytes includes the listeners' accept queue limits
// (4096 × 3 + 128), as node_exporter's inet_diag dump does; a state that empties has no
// series in the next scan, and the queues go when no socket is left.
func TestTCPStatFromDiagFixture(t *testing.T) {
	ts := newTCPScan(true)
	d := tcpDiag{seq: 1}
	d.startDump()
	if err := d.parse(readFixture(t, "inet_diag_dump"), &ts); err != nil {
		t.Fatal(err)
	}
	d.finishDump(&ts)
	r := series.NewRecorder()
	ts.emit(r, 1)
	want := map[string]uint64{
		"listen": 4, "established": 4, "close_wait": 3, "fin_wait2": 3, "time_wait": 3,
		"rx_queued_bytes": 1 + 1000 + 128000 + 3, "tx_queued_bytes": 3791872 + 3*4096 + 128,
	}
	if got := connectionStates(r); !maps.Equal(got, want) {
		t.Errorf("tcp.connection_states %v;\nwant %v", got, want)
	}

	// The next scan sees one listener only.
	ts.reset()
	ts.add(tcpSock{LocalPort: 22, State: tcpListen, Backlog: 511})
	clear(r.Values)
	ts.emit(r, 2)
	want = map[string]uint64{"listen": 1, "rx_queued_bytes": 0, "tx_queued_bytes": 511}
	if got := connectionStates(r); !maps.Equal(got, want) {
		t.Errorf("after the connections closed: %v; want %v", got, want)
	}
	ts.reset()
	clear(r.Values)
	ts.emit(r, 3)
	if got := connectionStates(r); len(got) != 0 {
		t.Errorf("no socket: %v; want no series", got)
	}
}
