package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master end (the "user") and the slave end (the
// CLI's standard input).
func openPTY(t *testing.T) (master *os.File, slave int) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s) })
	return m, s
}

// TestReadPassword: the prompt reads a line from a terminal without echoing it, restores echo,
// gives up when ctx is cancelled, and says so when standard input is no terminal.
func TestReadPassword(t *testing.T) {
	master, slave := openPTY(t)
	var prompt strings.Builder
	type result struct {
		p   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := readPassword(context.Background(), slave, &prompt, "Password: ")
		done <- result{p, err}
	}()
	// Wait until echo is off, then type.
	deadline := time.Now().Add(5 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(slave, unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if tio.Lflag&unix.ECHO == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("echo never turned off")
		}
		time.Sleep(5 * time.Millisecond)
	}
	master.Write([]byte("s3cret pw\r"))
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("readPassword did not return after a line")
	}
	if r.err != nil || r.p != "s3cret pw" {
		t.Errorf("readPassword = %q, %v; want %q", r.p, r.err, "s3cret pw")
	}
	if prompt.String() != "Password: \n" {
		t.Errorf("prompt written: %q", prompt.String())
	}
	tio, _ := unix.IoctlGetTermios(slave, unix.TCGETS)
	if tio.Lflag&unix.ECHO == 0 {
		t.Error("echo not restored")
	}
	// Nothing typed was echoed back to the user.
	fds := []unix.PollFd{{Fd: int32(master.Fd()), Events: unix.POLLIN}}
	if n, _ := unix.Poll(fds, 100); n > 0 {
		buf := make([]byte, 256)
		k, _ := unix.Read(int(master.Fd()), buf)
		if strings.Contains(string(buf[:k]), "s3cret") {
			t.Errorf("the password was echoed: %q", buf[:k])
		}
	}

	// Cancelled while waiting: echo is restored.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		p, err := readPassword(ctx, slave, io.Discard, "Password: ")
		done <- result{p, err}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("readPassword did not return when cancelled")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled readPassword = %q, %v; want context.Canceled", r.p, r.err)
	}
	if tio, _ := unix.IoctlGetTermios(slave, unix.TCGETS); tio.Lflag&unix.ECHO == 0 {
		t.Error("echo not restored after cancellation")
	}

	// Not a terminal.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := readPassword(context.Background(), int(f.Fd()), io.Discard, "Password: "); !errors.Is(err, errNoTerminal) {
		t.Errorf("readPassword on %s: %v; want errNoTerminal", os.DevNull, err)
	}
}
