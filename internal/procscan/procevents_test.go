package procscan

import (
	"context"
	"encoding/binary"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// TestProcessesEvents: on the real /proc a scan between two listings finds a new process
// through the process events alone, drops one that exited, and a scan after lost events lists
// /proc again.
func TestProcessesEvents(t *testing.T) {
	p := NewProcesses(Options{NoTaskIter: true}) // with the task iterator, no events are needed
	defer p.Close()
	collect := func() []Process {
		t.Helper()
		r := series.NewRecorder()
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		for src, reasons := range r.Problems {
			if src != "/proc/PID/io" { // pid 1 of this sandbox denies even root
				t.Errorf("problem %s: %v", src, reasons)
			}
		}
		return p.Table()
	}
	collect()
	if p.events == nil {
		t.Fatal("no process events (the agent runs as root in the initial namespaces, like this test)")
	}
	lists := p.lists
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	if findPID(collect(), child.Process.Pid) == nil {
		t.Errorf("the new process %d is not in the table", child.Process.Pid)
	}
	if p.lists != lists {
		t.Fatalf("the scan listed /proc (%d listings, %d before); want it to rely on the events", p.lists, lists)
	}
	child.Process.Kill()
	child.Wait()
	if findPID(collect(), child.Process.Pid) != nil {
		t.Errorf("the process %d that exited is still in the table", child.Process.Pid)
	}
	p.events.lost = true
	collect()
	if p.lists != lists+1 {
		t.Errorf("after lost events: %d listings, %d before; want one more", p.lists, lists)
	}
	for range listEvery {
		collect()
	}
	if p.lists < lists+2 {
		t.Errorf("no listing in %d scans", listEvery)
	}
}

// forkEvent builds the datagram the connector sends for a fork.
func forkEvent(parent, child, childTGID uint32) []byte {
	b := make([]byte, procEventData+16)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], 3) // NLMSG_DONE
	cn := b[nlmsgHdrLen:]
	binary.NativeEndian.PutUint32(cn[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(cn[4:], cnValProc)
	binary.NativeEndian.PutUint16(cn[16:], 16+16)
	ev := cn[cnMsgLen:]
	binary.NativeEndian.PutUint32(ev[0:], procEventFork)
	binary.NativeEndian.PutUint32(ev[16:], parent)
	binary.NativeEndian.PutUint32(ev[20:], parent)
	binary.NativeEndian.PutUint32(ev[24:], child)
	binary.NativeEndian.PutUint32(ev[28:], childTGID)
	return b
}

func TestParseProcEvents(t *testing.T) {
	two := append(forkEvent(1, 100, 100), forkEvent(100, 101, 100)...) // a process, then a thread
	var got []uint32
	if err := parseProcEvents(two, func(what uint32, data []byte, _ uint32) {
		got = append(got, what, binary.NativeEndian.Uint32(data[8:]), binary.NativeEndian.Uint32(data[12:]))
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{procEventFork, 100, 100, procEventFork, 101, 100}; len(got) != len(want) || got[1] != 100 || got[4] != 101 {
		t.Errorf("parsed %v; want %v", got, want)
	}
	for name, b := range map[string][]byte{
		"short header": make([]byte, 8),
		"length past the end": func() []byte {
			b := forkEvent(1, 2, 2)
			binary.NativeEndian.PutUint32(b, uint32(len(b)+1))
			return b
		}(),
		"event past the message": func() []byte {
			b := forkEvent(1, 2, 2)
			binary.NativeEndian.PutUint16(b[nlmsgHdrLen+16:], 200)
			return b
		}(),
		"too short for an event": func() []byte {
			b := forkEvent(1, 2, 2)[:procEventData-1]
			binary.NativeEndian.PutUint32(b, uint32(len(b)))
			return b
		}(),
	} {
		if err := parseProcEvents(b, func(uint32, []byte, uint32) {}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParseProcEvents(f *testing.F) {
	f.Add(forkEvent(1, 100, 100))
	f.Add(append(forkEvent(1, 100, 100), forkEvent(100, 101, 100)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// No panic, and every event takes a whole message: no more events than messages fit.
		n := 0
		parseProcEvents(b, func(what uint32, data []byte, _ uint32) {
			n++
			if n*procEventData > len(b) {
				t.Fatalf("%d events out of %d bytes", n, len(b))
			}
		})
	})
}

// TestProcEventsFilter: with forkFilter attached, the socket receives the fork of each new
// process and nothing else (no exec, exit, or thread's fork), so drain still sees every child.
func TestProcEventsFilter(t *testing.T) {
	e, err := openProcEvents(250 * time.Millisecond)
	if err != nil {
		t.Fatalf("process events (the tests run as root in the initial namespaces): %v", err)
	}
	defer e.close()
	if e.unfiltered {
		t.Fatal("the fork filter was not attached")
	}
	want := map[int]bool{}
	for range 10 {
		// A shell that starts a child and a thread-creating program (this test binary's
		// threads are forks of threads too).
		c := exec.Command("sh", "-c", "true & wait")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		want[c.Process.Pid] = true
	}
	var other []uint32
	got := map[int]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(e.fd, e.buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := parseProcEvents(e.buf[:n], func(what uint32, data []byte, _ uint32) {
			if what != procEventFork {
				other = append(other, what)
				return
			}
			child, tgid := binary.NativeEndian.Uint32(data[8:]), binary.NativeEndian.Uint32(data[12:])
			if child != tgid {
				t.Errorf("a thread's fork passed the filter: pid %d of %d", child, tgid)
			}
			if want[int(child)] {
				got[int(child)] = true
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("forks of %d of the %d children received", len(got), len(want))
	}
	if len(other) > 0 {
		t.Errorf("%d events other than forks passed the filter (types %x)", len(other), other)
	}
}
