package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/rrddrpc"
)

// rrddRPCActor returns the actor that serves xcp-rrdd's plugin XML-RPC on the Unix socket
// --rrdd-rpc (package rrddrpc), so that XAPI plugins register with the agent and write their
// files into --rrdd-dir, where the rrdd collector reads them; ok is false when --rrdd-rpc is
// empty. The socket is bound (and --rrdd-dir made if missing) here, when Run builds its actors;
// a failure to do so is the actor's error, which stops the agent. Interrupting the actor closes
// the server and removes its socket.
func (a *Agent) rrddRPCActor() (execute func() error, interrupt func(error), ok bool) {
	if a.cfg.RRDDRPC == "" {
		return nil, nil, false
	}
	fail := func(err error) (func() error, func(error), bool) {
		return func() error { return fmt.Errorf("--rrdd-rpc %s: %w", a.cfg.RRDDRPC, err) }, func(error) {}, true
	}
	if a.cfg.RRDDDir == "" {
		return fail(errors.New("needs --rrdd-dir, the directory plugins are told to write in"))
	}
	srv, err := rrddrpc.Listen(a.cfg.RRDDRPC, rrddrpc.Options{
		Dir:         a.cfg.RRDDDir,
		NextReading: a.nextRRDDRead,
		Log:         a.log.With("subsystem", "rrdd-rpc"),
	})
	if err != nil {
		return fail(err)
	}
	a.log.Info("serving xcp-rrdd's plugin RPC", "socket", srv.Path(), "plugin_dir", srv.Dir())
	a.rrddRPC.Store(srv)
	return srv.Serve, func(error) { srv.Close() }, true
}

// nextRRDDRead is how long until the scan that next reads --rrdd-dir starts: scans start on a
// ticker of --interval, so the next is an interval after the last one began, or the tick after
// that one if it is past (a slow scan skips ticks). Before the first scan it is one interval.
func (a *Agent) nextRRDDRead() time.Duration {
	iv := a.cfg.Interval
	v := a.reg.View()
	if v == nil || v.TS == 0 {
		return iv
	}
	since := time.Since(time.UnixMilli(v.TS))
	if since < 0 { // the clock went back
		return iv
	}
	return iv - since%iv
}

// rrddRPCStatus is nil unless the plugin RPC is being served.
func (a *Agent) rrddRPCStatus() *apiwire.RRDDRPC {
	srv := a.rrddRPC.Load()
	if srv == nil {
		return nil
	}
	st := srv.Stats()
	out := &apiwire.RRDDRPC{Socket: srv.Path(), Plugins: []apiwire.RRDDRPCPlugin{}, Calls: st.Calls, Failures: st.Failures,
		BadRequests: st.BadRequests, RefusedPeers: st.RefusedPeers}
	for _, p := range srv.Plugins() {
		out.Plugins = append(out.Plugins, apiwire.RRDDRPCPlugin{UID: p.UID, Protocol: p.Protocol, Frequency: p.Frequency, Since: p.Since.UnixMilli()})
	}
	return out
}
