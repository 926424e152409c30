package agent

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/flagfile"
	"github.com/cantal-go/cantal/internal/redact"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/sysscan"
)

// Config is everything the agent's flags set. The zero value is not usable; start from
// DefaultConfig or ParseFlags.
type Config struct {
	Listen           string        // HTTP addresses, comma-separated: host:port or unix:PATH
	GossipListen     string        // UDP gossip address; "" = same as Listen
	ClusterName      string        // enables gossip when not empty
	Peers            []string      // peers to join at start
	ClusterSize      int           // expected cluster size for gossip's timing (0: what the node knows)
	GossipKey        string        // file with the gossip encryption key
	StateDir         string        // history snapshot, node id, peers; "" = nothing persisted
	Interval         time.Duration // scan interval
	History          time.Duration // retention
	MaxSeries        int           // bound on series kept (0: none)
	SnapshotInterval time.Duration // how often history is saved besides at shutdown
	RRDDDir          string        // XAPI rrdd plugin files
	RRDDRPC          string        // Unix socket serving xcp-rrdd's plugin XML-RPC; "" = off
	TextfileDir      string        // *.prom files as node_exporter's textfile collector reads them; "" = off
	Interrupts       bool          // read /proc/interrupts (node_interrupts_total), off as node_exporter's collector
	TCPStat          bool          // node_tcp_connection_states, off as node_exporter's tcpstat collector
	Processes        bool          // node_processes_*, off as node_exporter's processes collector
	Systemd          bool          // node_systemd_* over D-Bus, off as node_exporter's systemd collector
	Proc             string        // proc root
	Sys              string        // sys root
	DockerRoot       string        // dockerd's --data-root, read to name its containers ("": /var/lib/docker)
	ContainerdState  string        // containerd's --state directory, read to name its containers ("": /run/containerd)
	CRIOStorage      string        // CRI-O's containers/storage root, read to name its containers ("": /var/lib/containers/storage)
	FSMountsExclude  string        // regexp of mount points the filesystem collector leaves out
	FSTypesExclude   string        // regexp of file system types it leaves out
	NodeName         string
	Statsd           string // statsd UDP address; "" = off
	Carbon           string // Graphite plaintext address; "" = off
	CarbonInterval   time.Duration
	CarbonPrefix     string        // Graphite path prefix; "{node}" is the node name as one path node
	CarbonMatch      string        // selector of the series sent to Carbon; "" = all
	InfluxHostTag    string        // tag naming the node in the Influx export; "" = none
	InfluxPath       string        // path of the Influx line-protocol export
	RemoteWrite      []string      // Prometheus remote-write URLs, default settings each
	RemoteWriteFile  string        // --remote-write-config: remote_write list with per-endpoint settings
	MetricsPerPID    bool          // /metrics: per-process series per pid instead of per group
	MetricsNoTS      bool          // /metrics: no sample timestamps (Prometheus stamps the scrape)
	Pprof            bool          // serve /debug/pprof
	TimerSlack       time.Duration // timer slack of the agent's threads (at most Interval/10); 0 = the kernel's
	NoBPF            bool          // do not load the BPF task iterator (package taskiter); read schedstat files
	LogLevel         string
	LogFormat        string

	WebConfig        string   // exporter-toolkit web config: TLS, client certificates, basic auth
	WriteUsers       []string // names (basic-auth users, client certificates' CNs) with the write role
	ReadUsers        []string // client certificates' CNs that read from anywhere in a cluster
	PrivateProcesses string   // auto (when /proc is mounted hidepid), on or off
	ShowCmdlines     bool     // serve command lines whole instead of redacted
	MaxConnections   int      // open HTTP connections at most; 0: half the descriptor limit
	MaxConnsPerSrc   int      // open connections from one IP address at most, every listener; 0: an eighth of MaxConnections
	MaxWebSockets    int      // open WebSockets at most; 0: a sixteenth of MaxConnections
	MaxAnswerBytes   int64    // bytes one query's answer may take (package querylimit)
	AnswerBudget     int64    // bytes of every answer built and not yet sent, together

	QueryTimeout        time.Duration // a PromQL query's time at most (/prometheus, Prometheus's --query.timeout)
	QueryMaxSamples     int           // samples a PromQL query may hold at once (--query.max-samples)
	QueryMaxConcurrency int           // PromQL queries evaluated at once (--query.max-concurrency)

	AlertRules    string        // YAML rules file (docs/alerts.md); "" = built-in rules only
	RuleFiles     []string      // --rule-files: globs of Prometheus rule files (internal/promrules)
	AlertCPU      float64       // cpu_busy above this % (0: off)
	AlertMemory   float64       // memory_low: available below this % (0: off)
	AlertDisk     float64       // filesystem_full: available below this % (0: off)
	AlertFor      time.Duration // how long the built-in machine rules must hold before firing
	AlertNodeDown bool          // node_down: a peer suspect or dead

	Alertmanagers    []string // --alertmanager: Alertmanager base URLs alerts are sent to (internal/notify)
	AlertmanagerFile string   // --alertmanager-config: alertmanagers list with per-Alertmanager settings

	ConfigFile string // --config: the YAML file the settings were read from; "" = none

	// inv is the invocation Load parsed, which a reload parses again (reload.go); nil for a
	// Config not made by Load.
	inv *invocation
}

// DefaultConfig returns the embedded defaults.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Listen:              "127.0.0.1:22682",
		StateDir:            "/var/lib/cantal",
		Interval:            2 * time.Second,
		History:             time.Hour,
		MaxSeries:           500_000,
		SnapshotInterval:    time.Minute,
		RRDDDir:             "/dev/shm/metrics",
		Proc:                "/proc",
		Sys:                 "/sys",
		FSMountsExclude:     sysscan.DefaultFSMountPointsExclude,
		FSTypesExclude:      sysscan.DefaultFSTypesExclude,
		NodeName:            host,
		CarbonInterval:      10 * time.Second,
		CarbonPrefix:        "{node}",
		InfluxHostTag:       "host",
		InfluxPath:          "/influx",
		LogLevel:            "info",
		LogFormat:           "text",
		TimerSlack:          5 * time.Millisecond,
		PrivateProcesses:    "auto",
		MaxAnswerBytes:      64 << 20,
		AnswerBudget:        256 << 20,
		QueryTimeout:        2 * time.Minute,
		QueryMaxSamples:     50_000_000,
		QueryMaxConcurrency: 20,
		AlertCPU:            90,
		AlertMemory:         10,
		AlertDisk:           10,
		AlertFor:            5 * time.Minute,
		AlertNodeDown:       true,
	}
}

// listFlag is a repeatable, comma-separated flag. It implements flagfile.List.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.p = append(*l.p, v)
		}
	}
	return nil
}

// Get implements flag.Getter.
func (l listFlag) Get() any { return *l.p }

// Reset empties the list, so that a later source replaces an earlier one's values.
func (l listFlag) Reset() { *l.p = nil }

// Mode is what an invocation of cantal-agent asks for besides its settings.
type Mode int

// The modes.
const (
	ModeRun         Mode = iota // run the agent
	ModeVersion                 // --version: print the build and exit
	ModeCheckConfig             // --check-config [FILE]: check the settings and exit
)

// commandOnly are the flags that are not settings: no key in a configuration file, no
// CANTAL_* variable.
var commandOnly = map[string]bool{"config": true, "check-config": true, "version": true}

// flagSet binds every flag to c's fields, and the command-only flags to mode and c.ConfigFile.
func (c *Config) flagSet(name string, version, check *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "YAML file of settings: each flag's name (without dashes) is a key; the command line and CANTAL_* override it (docs/configuration.md; packaged path /etc/cantal/agent.yml; empty: the embedded defaults)")
	fs.BoolVar(check, "check-config", false, "check the settings (the --config file, or the FILE given after this flag, with the rest of the command line and CANTAL_*), print the first error with its file:line, and exit 0 if they are valid, 1 if not")
	fs.BoolVar(version, "version", false, "print the version, VCS revision and Go version, and exit")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP address of the API and web UI: host:port or unix:PATH, several comma-separated")
	fs.StringVar(&c.GossipListen, "gossip-listen", c.GossipListen, "UDP gossip address (default: the address and port of --listen)")
	fs.StringVar(&c.ClusterName, "cluster-name", c.ClusterName, "cluster name; enables gossip with peers of the same name")
	fs.Var(listFlag{&c.Peers}, "peer", "peer gossip address to join (repeatable, or comma-separated)")
	fs.IntVar(&c.ClusterSize, "cluster-size", c.ClusterSize, "expected number of nodes, for the gossip settings that scale with it (probe timeout, fan-out), read once at start (0: the peers remembered in --state-dir and given by --peer, plus one)")
	fs.StringVar(&c.GossipKey, "gossip-key", c.GossipKey, "file holding the gossip encryption key (16, 24 or 32 bytes, raw or base64)")
	fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "directory for the history snapshot, node id and peers (empty: keep nothing)")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "scan interval")
	fs.DurationVar(&c.History, "history", c.History, "how much history to keep at full precision")
	fs.IntVar(&c.MaxSeries, "max-series", c.MaxSeries, "most collected series kept: beyond it those written longest ago (dead processes') are dropped with their history (0: no limit); pushed series have a budget of their own")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "how often the history snapshot is written (also at shutdown)")
	fs.StringVar(&c.RRDDDir, "rrdd-dir", c.RRDDDir, "directory of XAPI rrdd plugin files (empty: off)")
	fs.StringVar(&c.RRDDRPC, "rrdd-rpc", c.RRDDRPC, "Unix socket on which to serve xcp-rrdd's plugin XML-RPC, so unmodified XAPI plugins register and write into --rrdd-dir (XAPI's libraries look for /var/xapi/xcp-rrdd; empty: off)")
	fs.StringVar(&c.TextfileDir, "textfile-dir", c.TextfileDir, "directory of *.prom files in the Prometheus text format, read every scan as node_exporter's --collector.textfile.directory (files of root or the directory's owner only, at most 1 MiB each; empty: off)")
	fs.StringVar(&c.Proc, "proc", c.Proc, "proc file system root")
	fs.StringVar(&c.Sys, "sys", c.Sys, "sys file system root")
	fs.StringVar(&c.DockerRoot, "docker-root", c.DockerRoot, "dockerd's --data-root, whose containers/<id>/config.v2.json name its containers (default /var/lib/docker)")
	fs.StringVar(&c.ContainerdState, "containerd-state", c.ContainerdState, "containerd's --state directory, whose task bundles name its containers and Kubernetes pods (default /run/containerd)")
	fs.StringVar(&c.CRIOStorage, "crio-storage", c.CRIOStorage, "CRI-O's storage root (crio --root), whose overlay-containers/<id>/userdata/config.json name its Kubernetes containers (default /var/lib/containers/storage)")
	fs.StringVar(&c.FSMountsExclude, "fs-mount-points-exclude", c.FSMountsExclude, "regexp of mount points whose space and inodes are not collected (default: node_exporter 1.5's; empty: none left out)")
	fs.StringVar(&c.FSTypesExclude, "fs-types-exclude", c.FSTypesExclude, "regexp of file system types whose space and inodes are not collected (default: node_exporter 1.5's; empty: none left out)")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "node name shown to peers and users (default: host name)")
	fs.StringVar(&c.Statsd, "statsd", c.Statsd, "UDP address for statsd ingest (empty: off)")
	fs.StringVar(&c.Carbon, "carbon", c.Carbon, "Graphite/carbon plaintext address to send every series to (empty: off)")
	fs.DurationVar(&c.CarbonInterval, "carbon-interval", c.CarbonInterval, "how often to send to --carbon")
	fs.StringVar(&c.CarbonPrefix, "carbon-prefix", c.CarbonPrefix, "prefix of every Graphite path sent to --carbon; {node} is the node name with dots and other characters outside [A-Za-z0-9_-] as _ (empty: no prefix)")
	fs.StringVar(&c.CarbonMatch, "carbon-match", c.CarbonMatch, "selector of the series sent to --carbon (empty: every series)")
	fs.StringVar(&c.InfluxHostTag, "influx-host-tag", c.InfluxHostTag, "tag that carries the node name on every line of the Influx export, as Telegraf's host tag (empty: none)")
	fs.StringVar(&c.InfluxPath, "influx-path", c.InfluxPath, "HTTP path of the Influx line-protocol export")
	fs.Var(listFlag{&c.RemoteWrite}, "remote-write", "Prometheus remote-write URL to send every held point to, from a position kept in --state-dir (repeatable, or comma-separated; settings per endpoint: --remote-write-config)")
	fs.StringVar(&c.RemoteWriteFile, "remote-write-config", c.RemoteWriteFile, "YAML file with a remote_write list as Prometheus's: url, headers, basic_auth, authorization, tls_config, match, external_labels, queue_config (see docs/remote-write.md)")
	fs.BoolVar(&c.MetricsPerPID, "metrics-per-pid", c.MetricsPerPID, "export per-process series in /metrics per pid (labels pid, process, cgroup) instead of summed per group (label groupname)")
	fs.BoolVar(&c.MetricsNoTS, "metrics-no-timestamps", c.MetricsNoTS, "leave the scan time out of /metrics samples: Prometheus then stamps each sample with the scrape's time (and marks a vanished series stale at once) instead of storing it at the time the agent read it")
	fs.BoolVar(&c.Pprof, "pprof", c.Pprof, "serve /debug/pprof on the HTTP listener")
	fs.BoolVar(&c.Interrupts, "interrupts", c.Interrupts, "read /proc/interrupts at every scan: a counter per interrupt and CPU (node_interrupts_total, as node_exporter's --collector.interrupts, off by default as there: interrupts × CPUs series)")
	fs.BoolVar(&c.TCPStat, "tcpstat", c.TCPStat, "also export the TCP sockets per state as node_exporter's --collector.tcpstat does (node_tcp_connection_states: states with sockets only, rx_queued_bytes, tx_queued_bytes), off by default as there; the sockets are counted every 5th scan either way")
	fs.BoolVar(&c.Processes, "processes", c.Processes, "count processes and threads per state at every scan, as node_exporter's --collector.processes (node_processes_pids, _threads, _state, _threads_state, _max_processes, _max_threads), off by default as there: a multi-threaded process's threads are read one by one, every 5th scan")
	fs.BoolVar(&c.Systemd, "systemd", c.Systemd, "read systemd's units over D-Bus (the system bus, else systemd's private socket) every 10 s in the background, as node_exporter's --collector.systemd (node_systemd_unit_state, node_systemd_units, node_systemd_system_running, node_systemd_version), off by default as there; a read has 5 s and never holds up a scan")
	fs.BoolVar(&c.NoBPF, "no-bpf", c.NoBPF, "do not load the read-only BPF task iterator that reads every process's scheduler counters and uid in one pass; read each process's /proc/PID/schedstat instead")
	fs.DurationVar(&c.TimerSlack, "timer-slack", c.TimerSlack, "how late the kernel may wake the agent's threads, to batch wake-ups; at most a tenth of --interval is used (0: the kernel's default)")
	fs.StringVar(&c.WebConfig, "web-config", c.WebConfig, "exporter-toolkit web config file: TLS, client certificates (also the node's identity towards its peers), bcrypt basic auth")
	fs.Var(listFlag{&c.WriteUsers}, "write-users", "names allowed to write (/write, OTLP, POST /api/v1/peers, pprof): basic-auth users or client certificates' common names (repeatable, or comma-separated)")
	fs.Var(listFlag{&c.ReadUsers}, "read-users", "client certificates' common names that read from any address; in a cluster other certificates of the CA read only from a live member's address (repeatable, or comma-separated)")
	fs.StringVar(&c.PrivateProcesses, "private-processes", c.PrivateProcesses, "serve each local caller only its own processes and anonymous network callers none: auto (when /proc is mounted hidepid), on, off")
	fs.BoolVar(&c.ShowCmdlines, "show-cmdlines", c.ShowCmdlines, "serve process command lines whole (default: values that look like secrets are redacted)")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "open connections at most on each HTTP listener; the gossip TCP and statsd TCP listeners take a quarter of it each (0: half the descriptor limit, at most 4096)")
	fs.IntVar(&c.MaxConnsPerSrc, "max-connections-per-source", c.MaxConnsPerSrc, "open connections from one IP address (on a Unix socket, one uid) at most, on each listener (0: an eighth of --max-connections)")
	fs.IntVar(&c.MaxWebSockets, "max-websockets", c.MaxWebSockets, "open WebSockets (/api/v1/ws) at most (0: a sixteenth of --max-connections)")
	fs.Int64Var(&c.MaxAnswerBytes, "max-answer-bytes", c.MaxAnswerBytes, "bytes one query's answer may take; a larger one gets 422 (narrow the match or window)")
	fs.Int64Var(&c.AnswerBudget, "answer-budget", c.AnswerBudget, "bytes of every query answer built and not yet read by its client, together; past it new queries get 503 with Retry-After")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", c.QueryTimeout, "a PromQL query (/prometheus/api/v1/) running longer is stopped with Prometheus's timeout error (as Prometheus's --query.timeout)")
	fs.IntVar(&c.QueryMaxSamples, "query-max-samples", c.QueryMaxSamples, "samples a PromQL query may hold in memory at once; past it Prometheus's execution error (as --query.max-samples)")
	fs.IntVar(&c.QueryMaxConcurrency, "query-max-concurrency", c.QueryMaxConcurrency, "PromQL queries evaluated at once; the others wait (as --query.max-concurrency)")
	fs.Var(listFlag{&c.RuleFiles}, "rule-files", "globs of Prometheus rule files (recording and alerting rules, Prometheus's format) evaluated every --interval over the held history; a bad file stops the agent at start, a reload keeps the old rules (repeatable, or comma-separated; see docs/ecosystem.md)")
	fs.StringVar(&c.AlertRules, "alert-rules", c.AlertRules, "YAML file of threshold rules (selector, fn, op, threshold, for, severity, summary; see docs/alerts.md)")
	fs.Float64Var(&c.AlertCPU, "alert-cpu", c.AlertCPU, "alert cpu_busy when the CPUs are busy above this percentage for --alert-for (0: off)")
	fs.Float64Var(&c.AlertMemory, "alert-memory", c.AlertMemory, "alert memory_low when MemAvailable is below this percentage of MemTotal for --alert-for (0: off)")
	fs.Float64Var(&c.AlertDisk, "alert-disk", c.AlertDisk, "alert filesystem_full when a mount's available space is below this percentage of its size for --alert-for (0: off)")
	fs.DurationVar(&c.AlertFor, "alert-for", c.AlertFor, "how long the CPU, memory and disk conditions must hold before their alert fires")
	fs.BoolVar(&c.AlertNodeDown, "alert-node-down", c.AlertNodeDown, "alert node_down when a peer is suspect or dead in the membership and unseen for 10 s (sent to Alertmanager by one member of the cluster)")
	fs.Var(listFlag{&c.Alertmanagers}, "alertmanager", "Alertmanager base URL to send firing and resolved alerts to with its v2 API, the rule files' and the built-in ones (repeatable, or comma-separated; settings per Alertmanager: --alertmanager-config; see docs/ecosystem.md)")
	fs.StringVar(&c.AlertmanagerFile, "alertmanager-config", c.AlertmanagerFile, "YAML file with an alertmanagers list: url, timeout, basic_auth, authorization, tls_config, proxy_url; and queue_capacity (see docs/ecosystem.md)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	return fs
}

// ParseFlags is Load for callers that only run the agent: --version and --check-config give
// an error.
func ParseFlags(name string, args []string, getenv func(string) string) (Config, error) {
	c, mode, err := Load(name, args, getenv)
	if err == nil && mode != ModeRun {
		err = fmt.Errorf("--version and --check-config are not settings")
	}
	return c, err
}

// Load parses an invocation of cantal-agent into a validated Config: the embedded defaults,
// then the --config file (or CANTAL_CONFIG; see package flagfile for its format and the rules
// it is read under), then each flag's CANTAL_<FLAG> variable (upper case, dashes as
// underscores), then the command line: each source replaces what the ones before it set,
// repeatable flags included. It is the one path from a file and flags to a Config, used to
// run, by --check-config and by a reload (reload.go). getenv may be nil (no environment).
//
// With --version, Load returns ModeVersion and nothing else is checked. With --check-config
// the settings are checked as for a run and ModeCheckConfig is returned with the result; a
// single argument after the flags is then the file to check (as --config). Errors in the file
// name its path and line.
func Load(name string, args []string, getenv func(string) string) (Config, Mode, error) {
	c := DefaultConfig()
	var version, check bool
	fs := c.flagSet(name, &version, &check)
	if err := fs.Parse(args); err != nil {
		return c, ModeRun, err
	}
	mode := ModeRun
	switch {
	case version:
		return c, ModeVersion, nil
	case check:
		mode = ModeCheckConfig
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// Only the command line: every local user reads it (ps); a file or the environment is
	// private.
	for _, f := range []struct {
		name string
		urls []string
	}{{"remote-write", c.RemoteWrite}, {"alertmanager", c.Alertmanagers}} {
		if set[f.name] {
			if err := noPasswordOnCommandLine(f.name, f.urls); err != nil {
				return c, mode, err
			}
		}
	}
	switch {
	case fs.NArg() == 1 && check && !set["config"]:
		c.ConfigFile = fs.Arg(0)
		set["config"] = true
	case fs.NArg() > 0:
		return c, mode, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !set["config"] && getenv != nil {
		c.ConfigFile = getenv("CANTAL_CONFIG")
	}
	file := c.ConfigFile

	// Start again from the defaults: the file, the environment, then the command line.
	c = DefaultConfig()
	c.ConfigFile = file
	var fileLines map[string]int // line of each setting the file gives and nothing overrides
	if file != "" {
		data, err := flagfile.Read(file)
		if err != nil {
			return c, mode, fmt.Errorf("--config: %w", err)
		}
		if fileLines, err = flagfile.Apply(fs, file, data, func(n string) bool { return commandOnly[n] }); err != nil {
			return c, mode, err
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || commandOnly[f.Name] || getenv == nil {
			return
		}
		env := "CANTAL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			delete(fileLines, f.Name)
			if l, ok := f.Value.(flagfile.List); ok {
				l.Reset()
			}
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, mode, err
	}
	for n := range set {
		delete(fileLines, n)
		if l, ok := fs.Lookup(n).Value.(flagfile.List); ok {
			l.Reset()
		}
	}
	if err := fs.Parse(args); err != nil {
		return c, mode, err
	}
	c.ConfigFile = file
	c.inv = &invocation{name: name, args: args, getenv: getenv}
	if err := c.Validate(); err != nil {
		return c, mode, inFile(err, file, fileLines)
	}
	return c, mode, nil
}

var flagName = regexp.MustCompile(`--([a-z0-9-]+)`)

// inFile places a Validate error at the line of the file that set the first flag it names,
// when the file did (and neither the environment nor the command line overrode it).
func inFile(err error, file string, lines map[string]int) error {
	for _, m := range flagName.FindAllStringSubmatch(err.Error(), -1) {
		if line, ok := lines[m[1]]; ok {
			return &flagfile.Error{File: file, Line: line, Msg: err.Error()}
		}
	}
	return err
}

// noPasswordOnCommandLine refuses a --remote-write (or --alertmanager: name) URL given on the command line that carries a
// credential: user information (scheme://user:password@host, or a token as the user name) or a
// query parameter whose name says secret (?api_key=, ?token=: what package redact hides in
// command lines). Every user of the machine reads the command line (ps, /proc/PID/cmdline), so
// the secret would be out the moment the agent starts, and a warning could not take it back
// (issue 31, N12). The same URL in the environment (CANTAL_REMOTE_WRITE, which /proc shows only
// to the agent's user and root) or the password in a file (--remote-write-config,
// basic_auth.password_file) keeps it private.
func noPasswordOnCommandLine(name string, urls []string) error {
	env := "CANTAL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	for _, u := range urls {
		if r := redact.Args([]string{u}); r[0] != u {
			return fmt.Errorf("--%s %s: the URL carries a credential, which every user of the machine can read on the command line (ps): "+
				"give the URL in the environment as %s instead, or the password in a file (--%s-config, basic_auth.password_file)", name, r[0], env, name)
		}
	}
	return nil
}

// excludeRegexp compiles an exclusion flag; the empty string excludes nothing.
func excludeRegexp(s string) (*regexp.Regexp, error) {
	if s == "" {
		s = "^$" // mount points and types are never empty
	}
	return regexp.Compile(s)
}

// Validate reports settings that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Interval < 10*time.Millisecond:
		return fmt.Errorf("--interval %s is too short", c.Interval)
	case c.History < c.Interval:
		return fmt.Errorf("--history %s is shorter than --interval %s", c.History, c.Interval)
	case c.MaxSeries < 0:
		return fmt.Errorf("--max-series %d is negative", c.MaxSeries)
	case c.SnapshotInterval <= 0:
		return fmt.Errorf("--snapshot-interval must be positive")
	case c.TimerSlack < 0 || c.TimerSlack > time.Second:
		return fmt.Errorf("--timer-slack %s must be between 0 and 1s", c.TimerSlack)
	case c.Listen == "":
		return fmt.Errorf("--listen is required")
	case c.PrivateProcesses != "auto" && c.PrivateProcesses != "on" && c.PrivateProcesses != "off":
		return fmt.Errorf("--private-processes %q: want auto, on or off", c.PrivateProcesses)
	case c.MaxConnections < 0:
		return fmt.Errorf("--max-connections %d is negative", c.MaxConnections)
	case c.MaxConnsPerSrc < 0:
		return fmt.Errorf("--max-connections-per-source %d is negative", c.MaxConnsPerSrc)
	case c.MaxWebSockets < 0:
		return fmt.Errorf("--max-websockets %d is negative", c.MaxWebSockets)
	case c.MaxAnswerBytes < 64<<10 || c.AnswerBudget < c.MaxAnswerBytes:
		return fmt.Errorf("--max-answer-bytes %d must be at least 65536 and --answer-budget %d at least as large", c.MaxAnswerBytes, c.AnswerBudget)
	case c.QueryTimeout <= 0 || c.QueryMaxSamples <= 0 || c.QueryMaxConcurrency <= 0:
		return fmt.Errorf("--query-timeout %s, --query-max-samples %d and --query-max-concurrency %d must be positive", c.QueryTimeout, c.QueryMaxSamples, c.QueryMaxConcurrency)
	case c.ClusterSize < 0:
		return fmt.Errorf("--cluster-size %d is negative", c.ClusterSize)
	case !strings.HasPrefix(c.InfluxPath, "/"):
		return fmt.Errorf("--influx-path must start with /")
	case !(c.AlertCPU >= 0 && c.AlertCPU <= 100), !(c.AlertMemory >= 0 && c.AlertMemory <= 100), !(c.AlertDisk >= 0 && c.AlertDisk <= 100):
		return fmt.Errorf("--alert-cpu, --alert-memory and --alert-disk are percentages between 0 and 100")
	case c.AlertFor < 0:
		return fmt.Errorf("--alert-for %s is negative", c.AlertFor)
	}
	if _, err := excludeRegexp(c.FSMountsExclude); err != nil {
		return fmt.Errorf("--fs-mount-points-exclude: %w", err)
	}
	if _, err := excludeRegexp(c.FSTypesExclude); err != nil {
		return fmt.Errorf("--fs-types-exclude: %w", err)
	}
	if c.CarbonMatch != "" {
		if _, err := selector.Parse(c.CarbonMatch); err != nil {
			return fmt.Errorf("--carbon-match: %w", err)
		}
	}
	return nil
}
