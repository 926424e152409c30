package sysscan

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// TestMachineTCPEvery: with the default TCPEvery the sockets are counted at the first scan and
// every 5th after it; the scans between carry the last counts (a listener opened after a count
// appears at the next one, not before).
func TestMachineTCPEvery(t *testing.T) {
	m := NewMachine(Options{})
	defer m.Close()
	r := series.NewRecorder()
	listening := func(port int) (uint64, bool) {
		for key, ref := range r.Refs() {
			if ref.Labels["metric"] == "tcp.listen.sockets" && ref.Labels["port"] == strconv.Itoa(port) {
				v, ok := r.Values[key]
				return v, ok
			}
		}
		return 0, false
	}
	scan := func() {
		t.Helper()
		clear(r.Values)
		if err := m.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	scan() // scan 1: counted
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for i := 2; i <= tcpEvery; i++ {
		scan()
		if v, ok := listening(port); ok {
			t.Fatalf("scan %d, between counts, shows the new listener (%d)", i, v)
		}
		found := false
		for key, ref := range r.Refs() {
			if _, put := r.Values[key]; put && ref.Labels["metric"] == "tcp.sockets" && ref.Labels["state"] == "listen" {
				found = true
			}
		}
		if !found {
			t.Fatalf("scan %d puts no tcp.sockets{state=listen}", i)
		}
	}
	scan() // scan tcpEvery+1: counted again
	if v, ok := listening(port); !ok || v != 1 {
		t.Errorf("the count after the listener opened: tcp.listen.sockets{port=%d} = %d, %v; want 1", port, v, ok)
	}
}
