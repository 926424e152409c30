// Package netns builds throw-away multi-host networks from Linux network namespaces for
// distributed-system tests: N hosts, each a namespace with one interface eth0 at 10.77.0.N/24,
// all plugged by veth pairs into a bridge that lives in a namespace of its own, so the root
// namespace's network is never touched. Links can be cut and healed, packet loss injected, and
// commands run or started inside any host.
//
// It needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; loss injection uses tc netem
// when the kernel has it and nftables otherwise (scripts/install-deps.sh installs both
// tools). A Lab is torn down by Close, which kills what was started in it and deletes every
// namespace it made; use t.Cleanup(lab.Close) so that teardown always runs.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NamePrefix begins the name of every namespace this package makes, so stale ones left by a
// killed test can be found (see RemoveStale).
const NamePrefix = "cantaltest-"

// Options configures a Lab. The zero value gives 10.77.0.0/24.
type Options struct {
	// Subnet is the first three octets of the lab's /24 (default "10.77.0"); host i (from 1)
	// gets Subnet.i.
	Subnet string
}

// Lab is a set of hosts on one bridge. Its methods are safe for concurrent use.
type Lab struct {
	id     string
	bridge string // namespace holding the bridge
	hosts  []*Host
	subnet string

	mu     sync.Mutex
	procs  []*Proc
	closed bool
}

// Host is one namespace of a Lab.
type Host struct {
	lab   *Lab
	index int    // 1-based
	NS    string // namespace name, for `ip netns exec`
	IP    string // address of eth0
	MAC   string // hardware address of eth0
	port  string // the veth end in the bridge namespace
}

// Available reports why labs cannot be built on this machine, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: must run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: iproute2 missing (run scripts/install-deps.sh): %w", err)
	}
	return nil
}

// New builds a lab of n hosts (1 to 254). Every host has a permanent neighbour entry for every
// other (no ARP, no neighbour-table overflow at 150 hosts). On error everything made so far is
// removed.
func New(ctx context.Context, n int, opts Options) (*Lab, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if n < 1 || n > 254 {
		return nil, fmt.Errorf("netns: %d hosts, want 1 to 254", n)
	}
	if opts.Subnet == "" {
		opts.Subnet = "10.77.0"
	}
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("netns: lab id: %w", err)
	}
	l := &Lab{id: hex.EncodeToString(raw[:]), subnet: opts.Subnet}
	l.bridge = NamePrefix + l.id + "-br"
	if err := l.build(ctx, n); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) build(ctx context.Context, n int) error {
	// Three kinds of `ip -batch` run instead of one `ip` per step: a lab of 150 hosts takes
	// about 150 commands, not a thousand.
	var root, br strings.Builder
	fmt.Fprintf(&root, "netns add %s\n", l.bridge)
	br.WriteString("link set lo up\n")
	for _, b := range []string{"br0", "br1"} {
		fmt.Fprintf(&br, "link add %s type bridge forward_delay 0 stp_state 0\nlink set %s up\n", b, b)
	}
	for i := 1; i <= n; i++ {
		h := &Host{lab: l, index: i, NS: fmt.Sprintf("%s%s-h%d", NamePrefix, l.id, i),
			IP: fmt.Sprintf("%s.%d", l.subnet, i), MAC: hostMAC(l.id, i), port: "h" + strconv.Itoa(i)}
		l.hosts = append(l.hosts, h)
		fmt.Fprintf(&root, "netns add %s\n", h.NS)
		fmt.Fprintf(&br, "link add %s type veth peer name eth0 address %s netns %s\nlink set %s master br0\nlink set %s up\n",
			h.port, h.MAC, h.NS, h.port, h.port)
	}
	if err := batch(ctx, "", root.String()); err != nil {
		return err
	}
	if err := batch(ctx, l.bridge, br.String()); err != nil {
		return err
	}
	for _, h := range l.hosts {
		var b strings.Builder
		fmt.Fprintf(&b, "link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n", h.IP)
		// Permanent neighbour entries for every other host: the kernel's neighbour table is
		// shared by all namespaces (gc_thresh3, 1024 entries by default), and above ~32
		// hosts all talking to all it overflows ("neighbor table overflow!") and peers flap.
		// Permanent entries are exempt from that limit and need no ARP at all.
		for _, o := range l.hosts {
			if o != h {
				fmt.Fprintf(&b, "neigh replace %s lladdr %s dev eth0 nud permanent\n", o.IP, o.MAC)
			}
		}
		if err := batch(ctx, h.NS, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// hostMAC is host i's eth0 address: locally administered, unique per lab and host.
func hostMAC(labID string, i int) string {
	return fmt.Sprintf("02:%s:%s:%s:%02x:%02x", labID[:2], labID[2:4], labID[4:6], i>>8, i&0xff)
}

// batch runs `ip -batch -` with the given commands, in namespace ns ("" for the root one).
func batch(ctx context.Context, ns, cmds string) error {
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(cmds)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Partition splits the lab in two: the given hosts are moved to a second bridge, where they
// reach each other but none of the others, until HealPartition. Hosts cut by Cut stay cut.
func (l *Lab) Partition(ctx context.Context, hosts []*Host) error {
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "link set %s master br1\n", h.port)
	}
	return batch(ctx, l.bridge, b.String())
}

// HealPartition puts every host back on the one bridge.
func (l *Lab) HealPartition(ctx context.Context) error {
	var b strings.Builder
	for _, h := range l.hosts {
		fmt.Fprintf(&b, "link set %s master br0\n", h.port)
	}
	return batch(ctx, l.bridge, b.String())
}

// Hosts returns the lab's hosts, host 1 first.
func (l *Lab) Hosts() []*Host { return l.hosts }

// Close kills every process started in the lab and deletes its namespaces. It is safe to call
// twice and returns the first error.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := l.procs
	l.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	var first error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Deleted one by one (not in one batch, which stops at the first error): a lab whose build
	// failed half-way has only some of them.
	for _, h := range l.hosts {
		if err := run(ctx, "ip", "netns", "del", h.NS); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
			first = err
		}
	}
	if err := run(ctx, "ip", "netns", "del", l.bridge); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
		first = err
	}
	return first
}

// RemoveStale deletes namespaces left behind by labs whose process died before Close.
// Only call it when no other lab is running on the machine.
func RemoveStale(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("netns: list: %w", err)
	}
	var first error
	for _, ns := range Namespaces(string(out)) {
		if strings.HasPrefix(ns, NamePrefix) {
			if err := run(ctx, "ip", "netns", "del", ns); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Namespaces parses the output of `ip netns list` into names.
func Namespaces(list string) []string {
	var out []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// Name returns "h1", "h2", ...: the host's short name.
func (h *Host) Name() string { return h.port }

// Command returns a command that runs name with args inside the host's namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Exec runs a command in the host and returns its combined output; a failure's error holds it.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("netns: %s: %s %s: %w: %s", h.port, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Cut pulls the host's cable: its veth is set down on the bridge side, so nothing gets in or
// out until Heal.
func (h *Host) Cut(ctx context.Context) error {
	return run(ctx, "ip", "-n", h.lab.bridge, "link", "set", h.port, "down")
}

// Heal plugs the cable back in.
func (h *Host) Heal(ctx context.Context) error {
	return run(ctx, "ip", "-n", h.lab.bridge, "link", "set", h.port, "up")
}

// SetLoss makes the host drop percent (0 to 100) of the packets it sends on eth0, as
// `tc qdisc replace dev eth0 root netem loss percent%` does. Kernels without netem (some VMs)
// get the same effect from an nftables rule `numgen random mod 100 < percent drop`. Zero
// removes the loss.
func (h *Host) SetLoss(ctx context.Context, percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("netns: loss %d%%, want 0 to 100", percent)
	}
	// Clear both mechanisms; either may be absent.
	h.Exec(ctx, "tc", "qdisc", "del", "dev", "eth0", "root")
	h.Exec(ctx, "nft", "delete", "table", "inet", "cantal_loss")
	if percent == 0 {
		return nil
	}
	_, netemErr := h.Exec(ctx, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "loss", strconv.Itoa(percent)+"%")
	if netemErr == nil {
		return nil
	}
	rules := fmt.Sprintf("add table inet cantal_loss\n"+
		"add chain inet cantal_loss out { type filter hook output priority 0; policy accept; }\n"+
		"add rule inet cantal_loss out oifname \"eth0\" numgen random mod 100 < %d drop\n", percent)
	cmd := h.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netns: %s: loss: netem failed (%v) and nftables failed: %w: %s", h.port, netemErr, err, bytes.TrimSpace(out))
	}
	return nil
}

// Proc is a process started in a host. Its methods are safe for concurrent use.
type Proc struct {
	Host *Host
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // valid after done
}

// Start starts name with args in the host; the lab kills it at Close if it still runs. Its
// stdout and stderr are kept (see Output).
func (h *Host) Start(name string, args ...string) (*Proc, error) {
	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("netns: lab is closed")
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netns: %s: start %s: %w", h.port, name, err)
	}
	p := &Proc{Host: h, cmd: cmd, out: buf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	l.procs = append(l.procs, p)
	return p, nil
}

// StartAll starts, in every host, the command that args returns for it (for instance an
// agent listening on the host's IP and joining host 1). On error the processes already started
// keep running until the lab's Close.
func (l *Lab) StartAll(args func(h *Host) (name string, argv []string)) ([]*Proc, error) {
	var procs []*Proc
	for _, h := range l.hosts {
		name, argv := args(h)
		p, err := h.Start(name, argv...)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// Pid returns the process id (`ip netns exec` execs the command, so it is the command's own).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns what the process has written so far.
func (p *Proc) Output() string { return p.out.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err returns the process's exit error once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Kill kills the process group at once (a crash) and waits for the process to exit.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return // never signal a reused pid
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills. It returns the
// process's exit error.
func (p *Proc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
	return p.err
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
