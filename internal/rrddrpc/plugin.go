package rrddrpc

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Header is what Plugin.get_header answers: xcp-rrdd's rrdd_server.ml header, newline included.
// (The libraries write their own "DATASOURCES" and do not use it.)
const Header = "DATASOURCES\n"

// MaxUID is the longest plugin uid accepted, in bytes.
const MaxUID = 64

// Error tags of ErrorDescription, as xapi-idl marshals rrd_interface.ml's rrd_errors: the
// constructor's name, then its string argument.
const (
	tagInternal        = "Rrdd_internal_error"
	tagInvalidProtocol = "Invalid_protocol"
)

// Frequencies and protocols (rrd_interface.ml: rrd_freq, plugin_protocol).
const (
	fiveSeconds = "Five_Seconds"
	protoV1     = "V1"
	protoV2     = "V2"
)

// rpcError is a call's failure: its ErrorDescription is [tag, msg].
type rpcError struct{ tag, msg string }

func (e *rpcError) Error() string { return e.tag + ": " + e.msg }

func internalf(format string, args ...any) *rpcError {
	return &rpcError{tagInternal, fmt.Sprintf(format, args...)}
}

// CheckUID reports why uid cannot name a plugin's file: empty, longer than MaxUID bytes,
// containing "/", "..", NUL or another control character, not UTF-8, or starting with "."
// (rrddscan skips such names as temporary files). The error does not repeat the uid.
func CheckUID(uid string) error {
	switch {
	case uid == "":
		return errors.New("empty uid")
	case len(uid) > MaxUID:
		return fmt.Errorf("uid of %d bytes: at most %d", len(uid), MaxUID)
	case strings.ContainsRune(uid, '/'):
		return errors.New(`uid contains "/"`)
	case strings.Contains(uid, ".."):
		return errors.New(`uid contains ".."`)
	case strings.HasPrefix(uid, "."):
		return errors.New(`uid starts with "."`)
	case !utf8.ValidString(uid):
		return errors.New("uid is not UTF-8")
	case strings.ContainsFunc(uid, unicode.IsControl): // NUL included
		return errors.New("uid contains a control character")
	}
	return nil
}

// dispatch answers c: true and the Value, or false and the ErrorDescription.
func (s *Server) dispatch(c *Call) (bool, any) {
	v, err := s.answer(c)
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{tagInternal, err.Error()}
		}
		return false, []any{re.tag, re.msg}
	}
	return true, v
}

func (s *Server) answer(c *Call) (any, error) {
	switch c.Method {
	case "Plugin.get_header":
		return Header, nil
	case "Plugin.get_path":
		uid, err := uidArg(c.Params)
		if err != nil {
			return nil, err
		}
		return s.pluginPath(uid)
	case "Plugin.register":
		// rrd_interface.ml: "Equivalent to a Local plugin registration with V1 protocol."
		uid, err := uidArg(c.Params)
		if err != nil {
			return nil, err
		}
		freq, err := enumArg(c.Params, "frequency", 1, "")
		if err != nil {
			return nil, err
		}
		return s.register(uid, freq, protoV1)
	case "Plugin.Local.register":
		uid, err := uidArg(c.Params)
		if err != nil {
			return nil, err
		}
		freq, err := enumArg(c.Params, "info", 1, "")
		if err != nil {
			return nil, err
		}
		proto, err := enumArg(c.Params, "protocol", 2, protoV2) // [@@default V2]
		if err != nil {
			return nil, err
		}
		return s.register(uid, freq, proto)
	case "Plugin.next_reading", "Plugin.Local.next_reading":
		uid, err := uidArg(c.Params)
		if err != nil {
			return nil, err
		}
		return s.nextReading(uid), nil
	case "Plugin.deregister", "Plugin.Local.deregister":
		uid, err := uidArg(c.Params)
		if err != nil {
			return nil, err
		}
		s.deregister(uid)
		return nil, nil
	case "Plugin.Interdomain.register", "Plugin.Interdomain.next_reading", "Plugin.Interdomain.deregister":
		return nil, internalf("%s: interdomain plugins (Xen shared pages) are not supported; local plugins are", c.Method)
	}
	return nil, internalf("unknown method %q: this agent serves only xcp-rrdd's Plugin interface", clip(c.Method))
}

// arg returns the argument name of params: a member of the struct param that xapi-idl and
// rrdd.py send, or else the positional param pos.
func arg(params []any, name string, pos int) (any, bool) {
	if len(params) > 0 {
		if m, ok := params[0].(map[string]any); ok {
			v, ok := m[name]
			return v, ok
		}
	}
	if pos < len(params) {
		return params[pos], true
	}
	return nil, false
}

// uidArg returns the uid argument, checked with CheckUID.
func uidArg(params []any) (string, error) {
	v, ok := arg(params, "uid", 0)
	if !ok {
		return "", internalf("no uid argument")
	}
	uid, ok := v.(string)
	if !ok {
		return "", internalf("uid is not a string")
	}
	if err := CheckUID(uid); err != nil {
		return "", internalf("%v", err)
	}
	return uid, nil
}

// enumArg returns the variant argument name (rpclib marshals a constant constructor as its
// name, older versions as a one-element array of it); def when missing, unless def is "".
func enumArg(params []any, name string, pos int, def string) (string, error) {
	v, ok := arg(params, name, pos)
	if !ok {
		if def != "" {
			return def, nil
		}
		return "", internalf("no %s argument", name)
	}
	if a, ok := v.([]any); ok && len(a) == 1 {
		v = a[0]
	}
	s, ok := v.(string)
	if !ok {
		return "", internalf("%s is not a string", name)
	}
	return s, nil
}

// pluginPath answers get_path: the file of uid in the plugin directory, once the directory
// is there and trusted.
func (s *Server) pluginPath(uid string) (string, error) {
	if err := ensureDir(s.dir); err != nil {
		return "", internalf("the plugin directory is unusable: %v", err)
	}
	return filepath.Join(s.dir, uid), nil
}

// register registers uid and answers next_reading, as xcp-rrdd's Plugin.Make.register: a
// plugin registered already keeps its first registration.
func (s *Server) register(uid, freq, proto string) (float64, error) {
	// rpclib matches constructor names case-insensitively.
	if !strings.EqualFold(freq, fiveSeconds) {
		return 0, internalf("frequency %q: only %s is known", clip(freq), fiveSeconds)
	}
	switch {
	case strings.EqualFold(proto, protoV1):
		proto = protoV1
	case strings.EqualFold(proto, protoV2):
		proto = protoV2
	default:
		return 0, &rpcError{tagInvalidProtocol, clip(proto)}
	}
	s.mu.Lock()
	if _, ok := s.plugins[uid]; !ok {
		if len(s.plugins) >= s.opt.MaxPlugins {
			s.mu.Unlock()
			return 0, internalf("%d plugins registered already: deregister one first", len(s.plugins))
		}
		s.plugins[uid] = &Plugin{UID: uid, Frequency: fiveSeconds, Protocol: proto, Since: time.Now()}
		s.registrations.Add(1)
		s.log.Info("rrdd plugin registered", "uid", uid, "protocol", proto, "path", filepath.Join(s.dir, uid))
	}
	s.mu.Unlock()
	return s.nextReading(uid), nil
}

// nextReading answers next_reading: the seconds until the agent next reads the directory,
// rounded up to the millisecond (a reading due now is not answered as 0), or -1 when uid is
// not registered (as xcp-rrdd).
func (s *Server) nextReading(uid string) float64 {
	s.mu.Lock()
	_, ok := s.plugins[uid]
	s.mu.Unlock()
	if !ok {
		return -1
	}
	return math.Ceil(s.opt.NextReading().Seconds()*1000) / 1000
}

func (s *Server) deregister(uid string) {
	s.mu.Lock()
	_, ok := s.plugins[uid]
	delete(s.plugins, uid)
	s.mu.Unlock()
	if ok {
		s.log.Info("rrdd plugin deregistered", "uid", uid)
	}
}

// Plugins returns the registered plugins, by uid.
func (s *Server) Plugins() []Plugin {
	s.mu.Lock()
	ps := make([]Plugin, 0, len(s.plugins))
	for _, p := range s.plugins {
		ps = append(ps, *p)
	}
	s.mu.Unlock()
	slices.SortFunc(ps, func(a, b Plugin) int { return strings.Compare(a.UID, b.UID) })
	return ps
}
