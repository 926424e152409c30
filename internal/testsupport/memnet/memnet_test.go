package memnet

import (
	"io"
	"testing"
	"time"
)

func TestPacketsStreamsAndCut(t *testing.T) {
	var n Network
	a, err := n.NewTransport("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.NewTransport("10.0.0.2:7946")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.NewTransport("10.0.0.2:7946"); err == nil {
		t.Errorf("second transport on one address succeeded")
	}
	if _, err := n.NewTransport("nonsense"); err == nil {
		t.Errorf("transport on a bad address succeeded")
	}
	if ip, port, _ := b.FinalAdvertiseAddr("", 0); ip.String() != "10.0.0.2" || port != 7946 {
		t.Errorf("FinalAdvertiseAddr = %v:%d", ip, port)
	}

	a.WriteTo([]byte("ping"), b.Addr())
	select {
	case p := <-b.PacketCh():
		if string(p.Buf) != "ping" || p.From.String() != a.Addr() {
			t.Errorf("got %q from %v", p.Buf, p.From)
		}
	case <-time.After(time.Second):
		t.Fatal("packet not delivered")
	}
	if pk, by := n.Stats(); pk != 1 || by != 4 {
		t.Errorf("Stats = %d packets, %d bytes; want 1, 4", pk, by)
	}

	go func() {
		c := <-b.StreamCh()
		c.Write([]byte("hello"))
		c.Close()
	}()
	c, err := a.DialTimeout(b.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if string(got) != "hello" || c.RemoteAddr().String() != b.Addr() {
		t.Errorf("stream read %q from %v", got, c.RemoteAddr())
	}

	n.Cut(b.Addr(), true)
	a.WriteTo([]byte("lost"), b.Addr())
	if _, err := a.DialTimeout(b.Addr(), 100*time.Millisecond); err == nil {
		t.Errorf("dial through a cut succeeded")
	}
	n.Cut(b.Addr(), false)
	a.WriteTo([]byte("back"), b.Addr())
	if p := <-b.PacketCh(); string(p.Buf) != "back" {
		t.Errorf("after heal got %q; want back (the cut packet must be lost)", p.Buf)
	}

	b.Shutdown()
	b.Shutdown()
	if _, err := a.DialTimeout(b.Addr(), 100*time.Millisecond); err == nil {
		t.Errorf("dial to a shut down transport succeeded")
	}
	if _, err := a.WriteTo([]byte("x"), b.Addr()); err != nil {
		t.Errorf("WriteTo a gone peer = %v; want a silent loss", err)
	}
}

func TestFullQueueDrops(t *testing.T) {
	var n Network
	a, _ := n.NewTransport("")
	b, _ := n.NewTransport("")
	for i := 0; i < packetQueue+3; i++ {
		a.WriteTo([]byte("x"), b.Addr())
	}
	if pk, _ := n.Stats(); pk != packetQueue {
		t.Errorf("delivered %d packets; want %d", pk, packetQueue)
	}
	if d := n.Dropped(); d != 3 {
		t.Errorf("Dropped = %d; want 3", d)
	}
}
