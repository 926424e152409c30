// Package redact hides the values of command-line arguments that look like secrets, so that
// the agent can show command lines (GET /api/v1/processes) without handing out the passwords
// and tokens that programs are given on them.
//
// # The rule
//
// A name is sensitive when one of its words — split at every character other than an ASCII
// letter or digit, between letters and digits, and at camelCase boundaries (apiKey,
// APIKey, api_key, API-KEY all give "api" and "key"), compared case-insensitively — is one of:
//
//   - a word containing password, passwd, passphrase, secret, token, credential, cookie,
//     bearer or apikey (DBPASSWORD, authtoken, client_secret, setcookie);
//   - pass, pwd, pw, passin, passout or passcode;
//   - a word starting with auth or oauth (auth, authorization, authtoken, oauth2), except
//     author, authors, authored, authority, authorities and authoritative;
//   - key or keys, or a word ending in key or keys (apikey, accesskey, privatekey), except
//     monkey, hotkey, hockey, turkey, jockey, donkey and whiskey. keyboard, keyspace or
//     keyring are not sensitive: the word must end in key.
//
// The value of a sensitive name is replaced by Mask in these forms:
//
//  1. --name=value, -name=value, name=value at the start of an argument: the rest of the
//     argument (--db-password=a b → --db-password=***; -Dspring.datasource.password=x;
//     PGPASSWORD=x).
//  2. --name value, -name value: a sensitive option without "=" masks the whole next argument,
//     whatever it looks like (mongod --auth --port 1 → mongod --auth *** 1: better a flag lost
//     than a password beginning with "-" shown).
//  3. name=value inside an argument (a query string, a DSN, a "sh -c" script): the value up to
//     the next whitespace, '&', ';' or ',' (?api_key=x&y=1 → ?api_key=***&y=1;
//     "host=db password=x" → "host=db password=***"); a name at the start of a
//     whitespace-separated word takes the value to the end of that word. A value starting
//     with a quote runs to the matching quote (backslash escapes inside double quotes).
//  4. Inside an argument, a whitespace-separated word that is a sensitive option without "="
//     masks the next word ("app --token x --port 1" → "app --token *** --port 1"), quotes as in
//     3; a sensitive option at the end of an argument masks the next argument as in 2.
//  5. "name": "value" (JSON): the text between the value's quotes.
//  6. Name: value at the start of an argument, a header as curl -H takes it
//     ("Authorization: Bearer x" → "Authorization: ***").
//
// Besides names:
//
//  7. URL userinfo: scheme://user:password@host → scheme://user:***@host, and
//     scheme://token@host → scheme://***@host (a userinfo without a colon is most often a
//     token). The userinfo ends at the last '@' before the first '/', '?', '#', whitespace or
//     quote after "://"; a password with an unencoded '/', '?' or '#' (not a valid URL) may
//     show in part.
//  8. user:password after -u, -U, --user or an option whose last word is user (curl -u,
//     --proxy-user), as the next argument or after "=": the text after the first colon
//     (docker -u 1000:1000 shows 1000:***; harmless).
//  9. Programs that take a password in a short option: mysql, mariadb and their tools'
//     -pVALUE (and the argument after a lone -p), redis-cli's and valkey-cli's -a VALUE,
//     sshpass's -p VALUE. The program is the base name of the first argument.
//
// Not recognised (shown as they are): other program-specific short options, a secret given as
// a bare positional argument, "name: value" in the middle of an argument (YAML), and secrets in
// names the rule does not list. Redaction errs on the side of hiding: a non-secret value that
// follows a sensitive-looking flag (a key file's path, a flag after --auth) is masked too.
//
// Redaction only ever replaces text with Mask: what remains of an argument is its text in
// order, never anything new, and redacting twice changes nothing more.
package redact

import (
	"bytes"
	"path"
	"strings"
)

// Mask is what a redacted value is replaced with.
const Mask = "***"

// Args returns the command line args with secret values replaced by Mask (the package
// documentation states the rule). It never modifies args; when nothing needs hiding it returns
// args itself, without allocating. Safe for concurrent use.
func Args(args []string) []string {
	var out []string
	set := func(i int, v string) {
		if v == args[i] {
			return
		}
		if out == nil {
			out = make([]string, len(args))
			copy(out, args)
		}
		out[i] = v
	}
	prog := ""
	if len(args) > 0 {
		prog = path.Base(args[0])
	}
	programFlag := programFlags[prog]
	next := pendNone
	for i, a := range args {
		r, pend := scan(a)
		switch next {
		case pendMask:
			r = Mask
		case pendUser:
			r = maskUserPass(a)
		}
		if i > 0 && programFlag != "" && strings.HasPrefix(a, programFlag) && next == pendNone {
			if len(a) == len(programFlag) {
				pend = pendMask
			} else {
				r, pend = programFlag+Mask, pendNone
			}
		}
		set(i, r)
		next = pend
	}
	if out == nil {
		return args
	}
	return out
}

// Arg returns one argument redacted on its own: forms 1 and 3 to 7 of the rule, and 4 and 8
// within the argument (the next argument is not there to mask).
func Arg(s string) string {
	r, _ := scan(s)
	return r
}

// programFlags maps a program's base name to the short option it takes a password in.
var programFlags = map[string]string{
	"mysql": "-p", "mysqldump": "-p", "mysqladmin": "-p", "mysqlimport": "-p", "mysqlshow": "-p",
	"mysqlcheck": "-p", "mysqlbinlog": "-p", "mysqlpump": "-p", "mysqlsh": "-p",
	"mariadb": "-p", "mariadb-dump": "-p", "mariadb-admin": "-p", "mariadb-import": "-p",
	"mariadb-show": "-p", "mariadb-check": "-p", "mariadb-binlog": "-p",
	"redis-cli": "-a", "valkey-cli": "-a", "sshpass": "-p",
}

// pending says what the next word or argument is, after an option without "=".
type pending uint8

const (
	pendNone pending = iota
	pendMask         // the value of a sensitive option
	pendUser         // user:password
)

// scanner builds a redacted copy of s lazily: out stays nil until something is replaced.
type scanner struct {
	s    string
	out  []byte
	last int // s[last:] is not yet in out
}

// replace puts Mask in place of s[from:to].
func (sc *scanner) replace(from, to int) {
	if sc.s[from:to] == Mask {
		return
	}
	if sc.out == nil {
		sc.out = make([]byte, 0, len(sc.s)+len(Mask))
	}
	sc.out = append(sc.out, sc.s[sc.last:from]...)
	sc.out = append(sc.out, Mask...)
	sc.last = to
}

func (sc *scanner) result() string {
	if sc.out == nil {
		return sc.s
	}
	return string(append(sc.out, sc.s[sc.last:]...))
}

// scan redacts one argument and reports what its last word asks of the next argument.
func scan(s string) (string, pending) {
	sc := scanner{s: s}
	// 6: a header, Name: value.
	if n := nameRun(s, 0); n > 0 && n+1 < len(s) && s[n] == ':' && isSpace(s[n+1]) && Sensitive(s[:n]) {
		j := n + 1
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if j < len(s) {
			sc.replace(j, len(s))
		}
		return sc.result(), pendNone
	}
	pend := pendNone
	i := 0
	for i < len(s) {
		c := s[i]
		if isSpace(c) {
			i++
			continue
		}
		if i == 0 || isSpace(s[i-1]) { // a word starts
			switch pend {
			case pendMask:
				e := valueEnd(s, i, false)
				p := optionPending(s[i:wordEnd(s, i)])
				sc.replace(i, e)
				i, pend = e, p
				continue
			case pendUser:
				e := valueEnd(s, i, false)
				p := optionPending(s[i:wordEnd(s, i)])
				if k := strings.IndexByte(s[i:e], ':'); k >= 0 {
					sc.replace(i+k+1, e)
				}
				i, pend = e, p
				continue
			}
			e := wordEnd(s, i)
			if pend = optionPending(s[i:e]); pend != pendNone {
				i = e
				continue
			}
		}
		switch {
		case c == '=':
			j := i
			for j > 0 && isNameChar(s[j-1]) {
				j--
			}
			name := strings.TrimLeft(s[j:i], "-")
			if name == "" {
				break
			}
			var e int
			switch {
			case j == 0:
				e = len(s)
			case isSpace(s[j-1]):
				e = valueEnd(s, i+1, false)
			default:
				e = valueEnd(s, i+1, true)
			}
			if Sensitive(name) {
				if e > i+1 || j == 0 {
					sc.replace(i+1, e)
				}
				i = e
				continue
			}
			if userName(name) {
				if k := strings.IndexByte(s[i+1:e], ':'); k >= 0 {
					sc.replace(i+1+k+1, e)
				}
				i = e
				continue
			}
		case c == ':' && strings.HasPrefix(s[i:], "://"):
			if e := userinfo(&sc, i+3); e > 0 {
				i = e
				continue
			}
		case c == ':':
			if e := jsonValue(&sc, i); e > 0 {
				i = e
				continue
			}
		}
		i++
	}
	return sc.result(), pend
}

// userinfo masks the password (or the whole userinfo without a colon) of the URL authority
// starting at a, returning where scanning goes on (the '@'), or 0 when there is no userinfo.
func userinfo(sc *scanner, a int) int {
	s := sc.s
	e := a
	for e < len(s) && !isSpace(s[e]) && strings.IndexByte("/?#\"'", s[e]) < 0 {
		e++
	}
	at := strings.LastIndexByte(s[a:e], '@')
	if at <= 0 {
		return 0
	}
	at += a
	if k := strings.IndexByte(s[a:at], ':'); k >= 0 {
		sc.replace(a+k+1, at)
	} else {
		sc.replace(a, at)
	}
	return at
}

// maxJSONName is the longest JSON member name looked for.
const maxJSONName = 256

// jsonValue masks the string value after the colon at i when a sensitive quoted name precedes
// it ("name": "value"), returning where scanning goes on, or 0.
func jsonValue(sc *scanner, i int) int {
	s := sc.s
	k := i - 1
	for k >= 0 && isSpace(s[k]) {
		k--
	}
	if k < 1 || s[k] != '"' {
		return 0
	}
	lo := max(0, k-maxJSONName) // a bound, so that a line of ":" costs linear time
	q := strings.LastIndexByte(s[lo:k], '"')
	if q < 0 {
		return 0
	}
	q += lo
	if !Sensitive(s[q+1 : k]) {
		return 0
	}
	v := i + 1
	for v < len(s) && isSpace(s[v]) {
		v++
	}
	if v >= len(s) || s[v] != '"' {
		return 0
	}
	e := valueEnd(s, v, false) // past the closing quote, or the end
	end := e
	if e > v+1 && s[e-1] == '"' && e-1 > v {
		end = e - 1
	}
	sc.replace(v+1, max(end, v+1))
	return e
}

// optionPending says what an option word without "=" asks of the next word: a sensitive
// option's value, a user:password, or nothing (not an option, or an ordinary one).
func optionPending(w string) pending {
	if len(w) < 2 || w[0] != '-' || strings.IndexByte(w, '=') >= 0 || isDigit(w[1]) {
		return pendNone
	}
	name := strings.TrimLeft(w, "-")
	switch {
	case name == "":
		return pendNone
	case Sensitive(name):
		return pendMask
	case userName(name):
		return pendUser
	}
	return pendNone
}

// maskUserPass masks what follows the first colon of user:password.
func maskUserPass(s string) string {
	k := strings.IndexByte(s, ':')
	if k < 0 || s[k+1:] == Mask {
		return s
	}
	return s[:k+1] + Mask
}

// valueEnd returns where the value starting at i ends: past its closing quote when it starts
// with one (the end of s when unclosed), else at whitespace, or also at '&', ';' or ',' with
// sep.
func valueEnd(s string, i int, sep bool) int {
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q := s[i]
		for j := i + 1; j < len(s); j++ {
			if q == '"' && s[j] == '\\' {
				j++
				continue
			}
			if s[j] == q {
				return j + 1
			}
		}
		return len(s)
	}
	for j := i; j < len(s); j++ {
		c := s[j]
		if isSpace(c) || sep && (c == '&' || c == ';' || c == ',') {
			return j
		}
	}
	return len(s)
}

func wordEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

// nameRun returns the end of the run of name characters starting at i.
func nameRun(s string, i int) int {
	for i < len(s) && isNameChar(s[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isLower(c) || isUpper(c) }

func isNameChar(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// Sensitive reports whether name (an option, variable, parameter or header name) names a
// secret by the package's rule.
func Sensitive(name string) bool {
	var buf [64]byte
	for i := 0; ; {
		w, next := nextWord(name, i, buf[:0])
		if next < 0 {
			return false
		}
		if sensitiveWord(w) {
			return true
		}
		i = next
	}
}

// userName reports whether name takes user:password: u, U, or a last word "user".
func userName(name string) bool {
	if name == "u" || name == "U" {
		return true
	}
	var buf [64]byte
	last := false
	for i := 0; ; {
		w, next := nextWord(name, i, buf[:0])
		if next < 0 {
			return last
		}
		last, i = string(w) == "user", next
	}
}

// nextWord appends to dst the lower-cased first word of name at or after i and returns it with
// where the search for the next word starts, or next -1 when there is no word left.
func nextWord(name string, i int, dst []byte) (w []byte, next int) {
	for i < len(name) && !isAlnum(name[i]) {
		i++
	}
	if i == len(name) {
		return dst, -1
	}
	start := i
	for i++; i < len(name) && isAlnum(name[i]); i++ {
		p, c := name[i-1], name[i]
		if isLower(p) && isUpper(c) ||
			isUpper(p) && isUpper(c) && i+1 < len(name) && isLower(name[i+1]) ||
			isDigit(p) != isDigit(c) {
			break
		}
	}
	for _, c := range []byte(name[start:i]) {
		if isUpper(c) {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst, i
}

var (
	secretParts = [][]byte{[]byte("password"), []byte("passwd"), []byte("passphrase"), []byte("secret"), []byte("token"), []byte("credential"), []byte("cookie"), []byte("bearer"), []byte("apikey")}
	notAuth     = map[string]bool{"author": true, "authors": true, "authored": true, "authority": true, "authorities": true, "authoritative": true}
	notKey      = map[string]bool{"monkey": true, "hotkey": true, "hockey": true, "turkey": true, "jockey": true, "donkey": true, "whiskey": true}
)

func sensitiveWord(w []byte) bool {
	switch string(w) {
	case "pass", "pwd", "pw", "passin", "passout", "passcode":
		return true
	}
	for _, p := range secretParts {
		if bytes.Contains(w, p) {
			return true
		}
	}
	if bytes.HasPrefix(w, []byte("auth")) && !notAuth[string(w)] || bytes.HasPrefix(w, []byte("oauth")) {
		return true
	}
	base := bytes.TrimSuffix(w, []byte("s"))
	return bytes.HasSuffix(base, []byte("key")) && !notKey[string(base)]
}
