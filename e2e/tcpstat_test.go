package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// inNetNS runs f on a thread that has joined the network namespace at nsPath, so that the
// sockets f makes live there (a socket keeps its namespace). The thread goes back to its own
// namespace before it is unlocked; if it cannot, it stays locked and dies with the goroutine.
func inNetNS(nsPath string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(self)
		target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := f()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// TestNodeExporterTCPStatSideBySide: node_exporter 1.5 with --collector.tcpstat and the agent
// with --tcpstat, both in one fresh network namespace where the test alone makes sockets
// (listeners with connections waiting to be accepted, one with an accept queue limit of 7,
// the two programs' listeners and the scrapes' kept-alive connections), give the same
// node_tcp_connection_states series and values: the states with sockets, rx_queued_bytes and
// tx_queued_bytes (the listeners' limits included, as node_exporter's netlink dump counts them).
// A namespace of its own keeps the other tests' sockets out, so the counts hold still between
// the two scrapes.
func TestNodeExporterTCPStatSideBySide(t *testing.T) {
	background(t)()
	ne := startProc(t, nil, nil, "unshare", "--net", "--", "sh", "-c",
		"ip link set lo up && exec prometheus-node-exporter --web.listen-address=127.0.0.1:9100 --log.level=warn --collector.disable-defaults --collector.tcpstat")
	nsPath := "/proc/" + ne.pid() + "/ns/net"
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		ns, err := os.Readlink(nsPath)
		if err != nil || ns == own {
			return fmt.Errorf("node_exporter not in its namespace yet: %v %v", ns, err)
		}
		return nil
	})
	startProc(t, nil, nil, "nsenter", "--net="+nsPath, "--", filepath.Join(bin, "cantal-agent"),
		"--listen", "127.0.0.1:22682", "--interval", "500ms", "--state-dir", t.TempDir(), "--rrdd-dir", t.TempDir(),
		"--metrics-no-timestamps", "--tcpstat")

	// One kept-alive connection per program, made in the namespace.
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := inNetNS(nsPath, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
	defer client.CloseIdleConnections()
	scrape := func(u string) (*dto.MetricFamily, error) {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Accept", "text/plain; version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, err
		}
		f := fams["node_tcp_connection_states"]
		if f == nil {
			return nil, fmt.Errorf("%s: no node_tcp_connection_states", u)
		}
		return f, nil
	}

	// node_exporter answering means the namespace's loopback is up (the shell brings it up
	// before the exec), so the test's sockets can be made there.
	waitFor(t, 15*time.Second, func() error { _, err := scrape("http://127.0.0.1:9100/metrics"); return err })

	// The test's sockets: a listener with an accept queue limit of 7 and two connections it
	// has not accepted, and one with Go's limit (somaxconn) and none.
	var keep []interface{ Close() error }
	defer func() {
		for _, c := range keep {
			c.Close()
		}
	}()
	if err := inNetNS(nsPath, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), "listener")
		keep = append(keep, f)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		if err := unix.Listen(fd, 7); err != nil {
			return err
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
		for range 2 {
			c, err := net.Dial("tcp4", addr)
			if err != nil {
				return err
			}
			keep = append(keep, c)
		}
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			ln, err = net.Listen("tcp4", "127.0.0.1:0")
		}
		if err != nil {
			return err
		}
		keep = append(keep, ln)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// inFlight bounds the bytes of the scrapes' answers that may sit in a queue when a program
	// reads it: the agent's /metrics is the largest, under 256 KiB.
	const inFlight = 256 << 10
	var diff string
	waitFor(t, 30*time.Second, func() error {
		nf, err := scrape("http://127.0.0.1:9100/metrics")
		if err != nil {
			return err
		}
		af, err := scrape("http://127.0.0.1:22682/metrics")
		if err != nil {
			return err
		}
		if g, w := af.GetType(), nf.GetType(); g != w {
			t.Fatalf("type %v, node_exporter %v", g, w)
		}
		nv, av := values(nf), values(af)
		var keys []string
		for k := range nv {
			keys = append(keys, k)
		}
		for k := range av {
			if _, ok := nv[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		diff = ""
		for _, k := range keys {
			n, nok := nv[k]
			a, aok := av[k]
			if nok == aok && (k == "state=rx_queued_bytes" || k == "state=tx_queued_bytes") && math.Abs(n-a) <= inFlight {
				continue
			}
			// The test's two scrapes are connections of the namespace too, each established at
			// both its ends while it lasts: one program may read while one is open, the other
			// while it is not (CI at e271fcb, loaded: 8 against 6 for 30 s).
			if nok == aok && k == "state=established" && math.Abs(n-a) <= 4 {
				continue
			}
			if n != a || nok != aok {
				diff += fmt.Sprintf("  %s: node_exporter %v (%v), agent %v (%v)\n", k, n, nok, a, aok)
			}
		}
		// The queues hold what the listeners may queue and, at the moment each program read
		// them, the bytes of answers in flight (the test's own scrapes): the agent reads every
		// 5th scan, node_exporter at the scrape, so those differ by what was in flight then (CI
		// at 1099dac, loaded: rx 2 against 91881). The listeners' limits must be in the agent's
		// figure: each listener's 4096 (somaxconn) but the test's one of 7.
		if limits := (av["state=listen"]-1)*4096 + 7; av["state=tx_queued_bytes"] < limits {
			diff += fmt.Sprintf("  state=tx_queued_bytes: agent %v; want the %v its %v listeners may queue\n",
				av["state=tx_queued_bytes"], limits, av["state=listen"])
		}
		if diff != "" {
			return fmt.Errorf("differ:\n%s", diff)
		}
		// What the test made is there: 4 listeners (its 2, node_exporter's, the agent's HTTP
		// one; the agent's gossip listener makes 5), 2 unaccepted connections, limit 7.
		if nv["state=listen"] < 4 || nv["state=rx_queued_bytes"] < 2 || nv["state=established"] < 4 ||
			int(nv["state=tx_queued_bytes"])%4096 < 7 {
			return fmt.Errorf("the namespace's sockets are not all there: %v", nv)
		}
		t.Logf("node_tcp_connection_states on both: %v", nv)
		return nil
	})
}
