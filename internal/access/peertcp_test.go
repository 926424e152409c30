package access

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// dialAs connects to addr from a socket created while the thread's file-system uid was uid:
// the kernel gives a socket the fsuid of its creator as owner, so the connection looks to
// sock_diag like one made by that user's process.
func dialAs(t *testing.T, uid int, addr string) net.Conn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, _ := unix.SetfsuidRetUid(uid)
	c, err := net.Dial("tcp", addr)
	unix.Setfsuid(prev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes sockets of another uid: run it as root (the suite does)")
	}
}

func TestSocketOwnerNamesTheLocalCaller(t *testing.T) {
	needRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	server := ln.Addr().(*net.TCPAddr).AddrPort()
	for _, uid := range []int{0, 65534, 4242} {
		c := dialAs(t, uid, ln.Addr().String())
		client := c.LocalAddr().(*net.TCPAddr).AddrPort()
		got, found, err := socketOwner(client, server)
		if err != nil || !found || got != uint32(uid) {
			t.Errorf("socketOwner(%v, %v) = %d, %v, %v; want %d, true, nil", client, server, got, found, err, uid)
		}
	}
	// No socket of this namespace has that 4-tuple: a caller from elsewhere.
	other := netip.MustParseAddrPort("127.0.0.1:1")
	if _, found, err := socketOwner(other, server); found || err != nil {
		t.Errorf("socketOwner of no socket: found %v, %v; want not found, no error", found, err)
	}
}

// TestLocalTCPCallerSeesOnlyWhatProcShowsIt: without a web config, a local user on TCP gets
// the Unix socket's rules (N13): root all, another user only its own processes' details, and
// under private processes only its own processes; a caller without a recorded connection (not
// TCP) stays anonymous.
func TestLocalTCPCallerSeesOnlyWhatProcShowsIt(t *testing.T) {
	needRoot(t)
	for _, private := range []bool{false, true} {
		got := make(chan Caller, 1)
		g := &Guard{PrivateProcesses: private, Need: func(*http.Request) Role { return Read }}
		srv := httptest.NewUnstartedServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, _ := FromContext(r.Context())
			got <- c
		})))
		srv.Config.ConnContext = ConnContext
		srv.Start()
		ask := func(uid int) Caller {
			c := dialAs(t, uid, srv.Listener.Addr().String())
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			return <-got
		}
		if c := ask(0); c.Details != ProcessesAll || c.Processes != ProcessesAll || c.Name != "uid:0 (tcp)" {
			t.Errorf("private %v: root over TCP taken for %+v; want every process and detail", private, c)
		}
		c := ask(4242)
		wantProcs := ProcessesAll
		if private {
			wantProcs = ProcessesOwn
		}
		if c.Details != ProcessesOwn || c.UID != 4242 || c.Processes != wantProcs {
			t.Errorf("private %v: uid 4242 over TCP taken for %+v; want own details, processes %v", private, c, wantProcs)
		}
		if !c.Has(Write) {
			t.Errorf("private %v: a loopback caller lost the write role", private)
		}
		srv.Close()
	}
	// Outside the server's ConnContext nothing is recorded: the anonymous caller as before.
	r := httptest.NewRequest("GET", "/", nil).WithContext(context.Background())
	r.RemoteAddr = "192.0.2.1:1234"
	c, _ := (&Guard{}).identify(r)
	if c.Details != ProcessesAll || c.Via != "anonymous" {
		t.Errorf("unrecorded connection taken for %+v", c)
	}
}

func FuzzParseDiagReply(f *testing.F) {
	ok := diagRequest(7, netip.MustParseAddrPort("127.0.0.1:5"), netip.MustParseAddrPort("127.0.0.1:6"))
	f.Add(ok, uint32(7))
	f.Add([]byte{20, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 254, 255, 255, 255}, uint32(7))
	f.Add([]byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, seq uint32) {
		uid, found, done, err := parseDiagReply(b, seq)
		if err != nil && !done {
			t.Fatalf("error %v without done", err)
		}
		if found && (err != nil || !done) {
			t.Fatalf("found uid %d with err %v done %v", uid, err, done)
		}
	})
}

type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestRemoteTCPCallerStaysAnonymous: a connection whose other end is no socket of this host
// (another host, a container's own network) is the anonymous caller: no process under private
// processes, every detail without.
func TestRemoteTCPCallerStaysAnonymous(t *testing.T) {
	needRoot(t)
	conn := addrConn{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22682}, remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}
	for _, private := range []bool{false, true} {
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(ConnContext(r.Context(), conn))
		r.RemoteAddr = "127.0.0.1:1"
		c, _ := (&Guard{PrivateProcesses: private}).identify(r)
		want := ProcessesAll
		if private {
			want = ProcessesNone
		}
		if c.Via != "anonymous" || c.Name != "" || c.Processes != want || c.Details != ProcessesAll {
			t.Errorf("private %v: a caller from no local socket taken for %+v; want anonymous, processes %v", private, c, want)
		}
	}
}
