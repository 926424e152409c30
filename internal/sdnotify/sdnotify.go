// Package sdnotify tells the service manager about the agent's state with the sd_notify(3)
// datagram protocol: systemd's Type=notify units wait for READY=1 before they count as started
// (so `systemctl start` returns once the API answers, and units ordered after it start then).
// It is a few lines of the protocol rather than a library: one datagram to $NOTIFY_SOCKET.
//
// Functions are safe for concurrent use; they hold no state.
package sdnotify

import (
	"fmt"
	"net"
)

// Ready is the state sent once the agent serves its API.
const Ready = "READY=1"

// Stopping is the state sent when the agent begins to shut down.
const Stopping = "STOPPING=1"

// Notify sends state (e.g. Ready) to the socket named by socket, the value of $NOTIFY_SOCKET: a
// path, or an abstract socket written with a leading '@'. An empty socket (not run by a
// service manager that asks for notifications) sends nothing and returns false, nil.
func Notify(socket, state string) (bool, error) {
	if socket == "" {
		return false, nil
	}
	addr := &net.UnixAddr{Name: socket, Net: "unixgram"}
	if socket[0] == '@' {
		addr.Name = "\x00" + socket[1:]
	}
	c, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	return true, nil
}
