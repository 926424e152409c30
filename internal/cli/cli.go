// Package cli implements the `cantal` command-line tool: it queries a cantal-agent's HTTP API
// (status, processes, metrics, history, stats, peers, the cluster routes, and `top`, a live
// view of the node) and prints aligned tables or the agent's JSON, and reads an application's metrics straight from its shared-memory files with no agent
// running (`cantal values PID|PATH`).
//
// The command's main only builds a CLI from the process environment and calls Run; everything
// else lives here so that it is tested against an httptest agent and hand-written files.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultAgent is the agent queried when neither --agent nor CANTAL_AGENT is given.
const DefaultAgent = "http://127.0.0.1:22682"

// DefaultTimeout bounds each request to the agent when neither --timeout nor CANTAL_TIMEOUT
// is given: an agent that accepts connections but does not answer (stopped, hung) costs this
// much, not forever.
const DefaultTimeout = 10 * time.Second

// Exit codes returned by Run.
const (
	ExitOK    = 0 // success
	ExitError = 1 // the command failed: agent unreachable, agent error, unreadable files
	ExitUsage = 2 // bad command line
)

// CLI is one invocation's environment. The zero value is not usable; set at least Stdout and
// Stderr. A CLI is used by one Run at a time.
type CLI struct {
	Stdout, Stderr io.Writer
	// Stdin is where `top` reads its keys when it is a terminal (*os.File); nil means os.Stdin.
	Stdin io.Reader
	// Getenv reads the environment (CANTAL_AGENT, CANTAL_PATH, CANTAL_PASSWORD, ...). nil means
	// os.Getenv.
	Getenv func(string) string
	// HTTP is the client used to reach the agent, as it is: it then ignores a unix:PATH agent's
	// socket and the TLS flags (credentials are still sent). nil means a client with a 30 s
	// timeout made from the flags.
	HTTP *http.Client
	// Password asks the user for the password of --user, showing prompt and not echoing what
	// is typed; it returns an error wrapping errNoTerminal when it cannot ask. nil means the
	// terminal on standard input (the prompt on Stderr).
	Password func(ctx context.Context, prompt string) (string, error)
	// Proc is the proc file system used by `values PID` (default "/proc").
	Proc string
	// Now and Location fix the clock and time zone of the output (tests). nil: time.Now and
	// time.Local.
	Now      func() time.Time
	Location *time.Location
}

// usageError is a command-line mistake: reported with a hint and exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

const usageText = `Usage: cantal COMMAND [flags]

Query a cantal-agent:
  status                         the agent: node, version, uptime, scan timing, counts, problems
  processes [--sort pid|cpu|rss] every process the agent sees
  containers [--sort name|cpu|mem]
                                 every container the agent names: image, pod, CPU and
                                 throttling, memory against its limit, OOM kills, I/O, network
  metrics [SEL]                  latest value of each series matching SEL
  history [SEL] [--window DUR] [--rate]
                                 points of each matching series (--rate: counters as per-second rates)
  stats [SEL] [--window DUR] [--rate]
                                 count, min, max, mean, median, p90, p95, p99, slope per series
                                 (--rate: of counters' per-second rates)
  peers                          the other agents this one knows
  version (or --version)         this command's version, VCS revision and Go version
  top [--interval DUR] [--sort cpu|rss] [--once]
                                 live view of the node: CPU, memory, load, network and disk
                                 rates, the busiest processes; q quits, c/m sort by CPU/memory
                                 (--once: print one frame and exit)

Query the whole cluster through one agent:
  cluster metrics [SEL] [--agg sum|avg|min|max] [--by L,..|--without L,..] [--rate] [--node N,..]
                                 latest values on every node, with the nodes' status (an
                                 unreachable node's last values are not shown), and the
                                 aggregate over nodes (grouped without node, pid, process, cgroup)
  cluster history [SEL] [--window DUR] [--rate] [--agg FN] [--by|--without L,..] [--node N,..]
                                 every node's points side by side, one column per node, in time
                                 slots of the scan step; --agg adds the agent's aggregate column
                                 (a slot missing a node's point is marked partial)
  cluster stats [SEL] [--window DUR] [--rate] [--agg FN] [--by|--without L,..] [--node N,..]
                                 count, min, max, mean, median, p90, p95, p99, slope per node's
                                 series (and of the aggregate), from the cluster history

Read an application's metrics directly, no agent needed:
  values [PID|PATH]              PID: the process's CANTAL_PATH (read from /proc/PID/environ,
                                 resolved inside its mount namespace); PATH: a CANTAL_PATH base
                                 (or its .meta/.values file); none: $CANTAL_PATH

Flags (after the command, in any order):
  --agent URL    agent to query: http://HOST:PORT, https://HOST:PORT, or unix:PATH for its
                 Unix socket (default $CANTAL_AGENT or ` + DefaultAgent + `)
  --ca-file FILE https: the CA that signed the agent's certificate (default $CANTAL_CA_FILE,
                 else the system's CAs)
  --cert FILE, --key FILE
                 https: a client certificate and its key (default $CANTAL_CERT, $CANTAL_KEY)
  --timeout DUR  how long to wait for each answer of the agent (default $CANTAL_TIMEOUT or 10s);
                 an agent that accepts the connection but does not answer is reported as hung
  --user NAME    basic-auth user (default $CANTAL_USER); the password is read from the file
                 --password-file FILE names, else $CANTAL_PASSWORD, else $CANTAL_PASSWORD_FILE,
                 else asked for on the terminal. Never on the command line: every user sees it.
  --match SEL    series selector, same as the SEL argument: a name (requests.number) or
                 Prometheus matchers ({metric=~"cpu\\..*", pid="42"})
  --window DUR   history/stats window, e.g. 30s, 5m, 1h (default: the agent's, 5m)
  --rate         history, stats, cluster: per-second rates of counters
  --node NAME    cluster: only these nodes (repeatable or comma-separated; also {node="NAME"} in
                 SEL); a name the cluster does not have is an error, not a node without data
  -o FORMAT      table (default) or json (the agent's answer as it is; cluster stats adds
                 what the CLI computed); --json is -o json
`

// Run executes the command line args (without the program name) and returns the exit code.
// Errors are printed to Stderr as "cantal: ...".
func (c *CLI) Run(ctx context.Context, args []string) int {
	err := c.run(ctx, args)
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.Stdout, usageText)
		return ExitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(c.Stderr, "cantal: %v\nRun 'cantal help' for usage.\n", err)
		return ExitUsage
	}
	fmt.Fprintf(c.Stderr, "cantal: %v\n", err)
	return ExitError
}

// options are the parsed flags shared by the commands.
type options struct {
	conn   connOptions
	match  string
	window string
	rate   bool
	output string
	sort   string
	args   []string // positional arguments

	agg, by, without string   // cluster: aggregate function and grouping
	node             []string // cluster: --node names (each may be a comma list)
	interval         string   // top: refresh interval
	once             bool     // top: one frame
}

func (c *CLI) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

func (c *CLI) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *CLI) loc() *time.Location {
	if c.Location != nil {
		return c.Location
	}
	return time.Local
}

// spec says which flags a command takes and how many positional arguments.
type spec struct {
	match, window, rate, sort, agent bool
	agg, top                         bool
	maxArgs                          int
}

// commandSpec returns the spec of cmd, false for an unknown command.
func commandSpec(cmd string) (spec, bool) {
	switch cmd {
	case "status", "peers":
		return spec{agent: true}, true
	case "processes", "containers":
		return spec{agent: true, sort: true}, true
	case "metrics":
		return spec{agent: true, match: true, maxArgs: 1}, true
	case "history":
		return spec{agent: true, match: true, window: true, rate: true, maxArgs: 1}, true
	case "stats":
		return spec{agent: true, match: true, window: true, rate: true, maxArgs: 1}, true
	case "values":
		return spec{maxArgs: 1}, true
	case "cluster metrics":
		return spec{agent: true, match: true, rate: true, agg: true, maxArgs: 1}, true
	case "cluster history", "cluster stats":
		return spec{agent: true, match: true, window: true, rate: true, agg: true, maxArgs: 1}, true
	case "top":
		return spec{agent: true, sort: true, top: true}, true
	}
	return spec{}, false
}

// flagSet binds the flags cmd takes (by its spec) to o and timeout; defaults come from the
// environment (c.Getenv). It is the one list of the flags: parse and Reference read it.
func (c *CLI) flagSet(cmd string, spec spec, o *options, timeout *string) *flag.FlagSet {
	fs := flag.NewFlagSet("cantal "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if spec.agent {
		o.conn.agent = c.getenv("CANTAL_AGENT")
		if o.conn.agent == "" {
			o.conn.agent = DefaultAgent
		}
		fs.StringVar(&o.conn.agent, "agent", o.conn.agent, "")
		fs.StringVar(timeout, "timeout", c.getenv("CANTAL_TIMEOUT"), "")
		for _, f := range []struct {
			name, env string
			v         *string
		}{
			{"ca-file", "CANTAL_CA_FILE", &o.conn.caFile},
			{"cert", "CANTAL_CERT", &o.conn.cert},
			{"key", "CANTAL_KEY", &o.conn.key},
			{"user", "CANTAL_USER", &o.conn.user},
			{"password-file", "CANTAL_PASSWORD_FILE", &o.conn.passwordFile},
		} {
			fs.StringVar(f.v, f.name, c.getenv(f.env), "")
		}
	}
	if spec.match {
		fs.StringVar(&o.match, "match", "", "")
	}
	if spec.window {
		fs.StringVar(&o.window, "window", "", "")
	}
	if spec.rate {
		fs.BoolVar(&o.rate, "rate", false, "")
	}
	if spec.sort {
		fs.StringVar(&o.sort, "sort", o.sort, "")
	}
	if spec.agg {
		fs.Func("node", "", func(v string) error {
			if strings.TrimSpace(strings.ReplaceAll(v, ",", "")) == "" {
				return fmt.Errorf("want a node name")
			}
			o.node = append(o.node, v)
			return nil
		})
		fs.StringVar(&o.agg, "agg", "", "")
		fs.StringVar(&o.by, "by", "", "")
		fs.StringVar(&o.without, "without", "", "")
	}
	if spec.top {
		fs.StringVar(&o.interval, "interval", "", "")
		fs.BoolVar(&o.once, "once", false, "")
	}
	fs.StringVar(&o.output, "o", o.output, "")
	fs.StringVar(&o.output, "output", o.output, "")
	fs.BoolFunc("json", "", func(string) error { o.output = "json"; return nil })
	return fs
}

func (c *CLI) parse(cmd string, args []string) (options, error) {
	spec, _ := commandSpec(cmd)
	o := options{output: "table", sort: "pid"}
	if cmd == "containers" {
		o.sort = "name"
	}
	timeout := "" // --timeout, read when the command talks to an agent
	fs := c.flagSet(cmd, spec, &o, &timeout)
	// Flags and positional arguments may be interleaved.
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return o, err
			}
			return o, usagef("%s: %v", cmd, err)
		}
		if fs.NArg() == 0 {
			break
		}
		o.args = append(o.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
	o.conn.flagged = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.conn.flagged[f.Name] = true })
	if len(o.args) > spec.maxArgs {
		return o, usagef("%s: unexpected argument %q", cmd, o.args[spec.maxArgs])
	}
	if len(o.args) == 1 && spec.match {
		if o.match != "" {
			return o, usagef("%s: give the selector either as an argument or with --match, not both", cmd)
		}
		o.match = o.args[0]
	}
	if o.output != "table" && o.output != "json" {
		return o, usagef("%s: -o %q: want table or json", cmd, o.output)
	}
	if o.window != "" {
		d, err := time.ParseDuration(o.window)
		if err != nil || d <= 0 {
			return o, usagef("%s: --window %q: want a positive duration such as 30s, 5m or 1h", cmd, o.window)
		}
	}
	if spec.agent {
		var err error
		if o.conn.timeout, err = parseTimeout(cmd, timeout); err != nil {
			return o, err
		}
	}
	switch {
	case cmd == "containers":
		if o.sort != "name" && o.sort != "cpu" && o.sort != "mem" {
			return o, usagef("%s: --sort %q: want name, cpu or mem", cmd, o.sort)
		}
	case o.sort != "pid" && o.sort != "cpu" && o.sort != "rss":
		return o, usagef("%s: --sort %q: want pid, cpu or rss", cmd, o.sort)
	}
	switch o.agg {
	case "", "sum", "avg", "min", "max":
	default:
		return o, usagef("%s: --agg %q: want sum, avg, min or max", cmd, o.agg)
	}
	if o.by != "" && o.without != "" {
		return o, usagef("%s: --by and --without exclude each other", cmd)
	}
	return o, nil
}

func (c *CLI) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command given")
	}
	cmd := args[0]
	switch cmd {
	case "help", "-h", "-help", "--help":
		return flag.ErrHelp
	case "version", "-version", "--version":
		fmt.Fprintln(c.Stdout, "cantal", buildinfo.Get())
		return nil
	case "cluster":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return usagef("cluster: want a subcommand: metrics, history or stats")
		}
		cmd = "cluster " + args[1]
		args = args[1:]
	}
	if _, ok := commandSpec(cmd); !ok {
		return usagef("unknown command %q", cmd)
	}
	o, err := c.parse(cmd, args[1:])
	if err != nil {
		return err
	}
	if cmd == "values" {
		return c.values(ctx, o)
	}
	a, err := c.newAgent(ctx, o.conn, c.HTTP)
	if err != nil {
		return err
	}
	switch cmd {
	case "status":
		return c.status(ctx, a, o)
	case "processes":
		return c.processes(ctx, a, o)
	case "containers":
		return c.containers(ctx, a, o)
	case "metrics":
		return c.metrics(ctx, a, o)
	case "history":
		return c.history(ctx, a, o)
	case "stats":
		return c.stats(ctx, a, o)
	case "peers":
		return c.peers(ctx, a, o)
	case "cluster metrics":
		return c.clusterMetrics(ctx, a, o)
	case "cluster history":
		return c.clusterHistory(ctx, a, o)
	case "cluster stats":
		return c.clusterStats(ctx, a, o)
	case "top":
		return c.top(ctx, a, o)
	}
	return usagef("unknown command %q", cmd)
}

// nodes returns the --node names as the agent's node= parameter (comma-separated; "" for
// every node).
func (o options) nodes() string { return strings.Join(o.node, ",") }

// parseTimeout reads --timeout (or CANTAL_TIMEOUT): a positive duration, DefaultTimeout when
// empty.
func parseTimeout(cmd, v string) (time.Duration, error) {
	if v == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s: --timeout %q: want a positive duration such as 5s or 1m", cmd, v)
	}
	return d, nil
}

// isDigits reports whether s is a non-empty string of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return strings.TrimLeft(s, "0") != "" || s == "0"
}
