package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// promptTerminal returns the default CLI.Password: it reads a line from standard input with
// echo turned off, when standard input is a terminal, writing the prompt to w. Echo is restored
// before it returns, also when ctx is cancelled (Ctrl-C) while it waits.
//
// It is golang.org/x/term's ReadPassword in a few lines of golang.org/x/sys/unix, which the
// module already requires, plus the cancellation x/term lacks.
func promptTerminal(w io.Writer) func(context.Context, string) (string, error) {
	return func(ctx context.Context, prompt string) (string, error) {
		return readPassword(ctx, int(os.Stdin.Fd()), w, prompt)
	}
}

func readPassword(ctx context.Context, fd int, w io.Writer, prompt string) (string, error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", errNoTerminal
	}
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	noEcho.Lflag |= unix.ICANON | unix.ISIG
	noEcho.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return "", fmt.Errorf("turn off echo: %w", err)
	}
	defer func() {
		unix.IoctlSetTermios(fd, unix.TCSETS, old)
		fmt.Fprintln(w) // the user's Enter was not echoed
	}()
	fmt.Fprint(w, prompt)
	var line []byte
	buf := make([]byte, 256)
	for {
		// Wait in slices so that a cancelled ctx (SIGINT is caught by main) ends the prompt
		// and restores echo instead of leaving the read blocked.
		if err := ctx.Err(); err != nil {
			return "", err
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if errors.Is(err, unix.EINTR) || n == 0 {
			continue
		}
		if err != nil {
			return "", err
		}
		n, err = unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return "", err
		}
		if n == 0 { // end of input (Ctrl-D on an empty line)
			if len(line) == 0 {
				return "", io.EOF
			}
			return string(line), nil
		}
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = bytes.TrimSuffix(line[:i], []byte{'\r'})
			return string(line), nil
		}
	}
}
