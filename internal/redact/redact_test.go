package redact

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestArgsRedactSecrets: Args masks the value of every secret-named option or variable in a
// command line, with or without "=", and leaves other arguments as they are.
//
// Security finding 12.
func TestArgsRedactSecrets(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
	}{
		// 1: option and variable with "=": the rest of the argument.
		{[]string{"app", "--db-password=hunter2", "--port=5432"}, []string{"app", "--db-password=***", "--port=5432"}},
		{[]string{"app", "--db-password=a b c"}, []string{"app", "--db-password=***"}},
		{[]string{"java", "-Dspring.datasource.password=s3cr3t", "-Xmx2g"}, []string{"java", "-Dspring.datasource.password=***", "-Xmx2g"}},
		{[]string{"env", "PGPASSWORD=x&y", "MYSQL_PWD=z", "HOME=/root"}, []string{"env", "PGPASSWORD=***", "MYSQL_PWD=***", "HOME=/root"}},
		{[]string{"app", "--apiKey=k", "--API_KEY=k", "--x-api-key=k", "--AWS_SECRET_ACCESS_KEY=k"}, []string{"app", "--apiKey=***", "--API_KEY=***", "--x-api-key=***", "--AWS_SECRET_ACCESS_KEY=***"}},
		{[]string{"app", "--password="}, []string{"app", "--password=***"}},
		// 2: option without "=": the whole next argument, whatever it is.
		{[]string{"app", "--password", "hunter2", "--port", "1"}, []string{"app", "--password", "***", "--port", "1"}},
		{[]string{"app", "--token", "--starts-with-dashes"}, []string{"app", "--token", "***"}},
		{[]string{"mongod", "--auth", "--port", "27017"}, []string{"mongod", "--auth", "***", "27017"}},
		{[]string{"app", "-secret", "a b"}, []string{"app", "-secret", "***"}},
		{[]string{"app", "--password", "--token", "x"}, []string{"app", "--password", "***", "***"}},
		{[]string{"openssl", "rsa", "-passin", "pass:abc"}, []string{"openssl", "rsa", "-passin", "***"}},
		// Not sensitive.
		{[]string{"app", "--keyboard=us", "--keyspace", "ks", "--author", "me", "--monkey=1", "--passive", "x", "-5", "7"}, nil},
		{[]string{"app", "--bypass=1", "--compass", "n", "--authority=ca", "--keyring=/k", "--pid-file=/run/x.pid"}, nil},
		// 3: inside an argument.
		{[]string{"curl", "https://api.example.com/v1?api_key=abc123&limit=10"}, []string{"curl", "https://api.example.com/v1?api_key=***&limit=10"}},
		{[]string{"psql", "host=db user=app password=p4ss dbname=x"}, []string{"psql", "host=db user=app password=*** dbname=x"}},
		{[]string{"app", "Server=db;Password=p4ss;Database=x"}, []string{"app", "Server=db;Password=***;Database=x"}},
		{[]string{"psql", "host=db password='a b' dbname=x"}, []string{"psql", "host=db password=*** dbname=x"}},
		{[]string{"sh", "-c", "exec app --db-password=p4ss --port 1"}, []string{"sh", "-c", "exec app --db-password=*** --port 1"}},
		// 4: an option inside an argument masks the next word; at the end, the next argument.
		{[]string{"sh", "-c", "exec app --token t0k --port 1"}, []string{"sh", "-c", "exec app --token *** --port 1"}},
		{[]string{"sh", "-c", `app --password "a b" -v`}, []string{"sh", "-c", "app --password *** -v"}},
		{[]string{"sh", "-c", "app --password", "x"}, []string{"sh", "-c", "app --password", "***"}},
		// 5: JSON.
		{[]string{"app", `--config={"user": "u", "password": "p\"w", "n": 1}`}, []string{"app", `--config={"user": "u", "password": "***", "n": 1}`}},
		{[]string{"app", `{"clientSecret":"abc"}`}, []string{"app", `{"clientSecret":"***"}`}},
		// 6: headers.
		{[]string{"curl", "-H", "Authorization: Bearer abc.def", "-H", "Accept: text/plain"}, []string{"curl", "-H", "Authorization: ***", "-H", "Accept: text/plain"}},
		{[]string{"curl", "-H", "X-Api-Key:  k"}, []string{"curl", "-H", "X-Api-Key:  ***"}},
		// 7: URL userinfo.
		{[]string{"app", "--db=postgres://app:p4ss@db:5432/x"}, []string{"app", "--db=postgres://app:***@db:5432/x"}},
		{[]string{"app", "postgres://app:p@ss@db/x?sslmode=off"}, []string{"app", "postgres://app:***@db/x?sslmode=off"}},
		{[]string{"git", "clone", "https://ghp_abc@github.com/o/r"}, []string{"git", "clone", "https://***@github.com/o/r"}},
		{[]string{"app", "--upstream", "http://h:80/path@v1", "https://example.com/a"}, []string{"app", "--upstream", "http://h:80/path@v1", "https://example.com/a"}},
		// 8: user:password.
		{[]string{"curl", "-u", "bob:pw", "--proxy-user=al:pw2", "-u", "onlyuser"}, []string{"curl", "-u", "bob:***", "--proxy-user=al:***", "-u", "onlyuser"}},
		// 9: programs' own short options.
		{[]string{"/usr/bin/mysql", "-uroot", "-pS3cret", "db"}, []string{"/usr/bin/mysql", "-uroot", "-p***", "db"}},
		{[]string{"mysqldump", "-p", "db"}, []string{"mysqldump", "-p", "***"}},
		{[]string{"redis-cli", "-a", "pw", "-p", "6379"}, []string{"redis-cli", "-a", "***", "-p", "6379"}},
		{[]string{"sshpass", "-p", "pw", "ssh", "h"}, []string{"sshpass", "-p", "***", "ssh", "h"}},
		{[]string{"app", "-pS3cret"}, nil}, // not a program known to take -p
		// Already redacted, empty, nothing to do.
		{[]string{"app", "--password=***", "--token", "***", "postgres://a:***@h"}, nil},
		{[]string{}, nil},
		{nil, nil},
	} {
		want := tc.want
		if want == nil {
			want = tc.in
		}
		in := slices.Clone(tc.in)
		got := Args(tc.in)
		if !slices.Equal(got, want) {
			t.Errorf("Args(%q)\n = %q\nwant %q", tc.in, got, want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Args(%q) modified its argument to %q", in, tc.in)
		}
		if tc.want == nil && len(tc.in) > 0 && &got[0] != &tc.in[0] {
			t.Errorf("Args(%q) copied a command line with nothing to hide", tc.in)
		}
	}
}

// TestSensitiveNames: Sensitive tells secret-like option and variable names (password, token,
// key, auth...) from look-alikes that are not.
//
// Security finding 12.
func TestSensitiveNames(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "DB_PASSWORD": true, "dbPassword": true, "PGPASSWORD": true, "passwd": true,
		"pass": true, "pwd": true, "MYSQL_PWD": true, "secret": true, "client-secret": true,
		"token": true, "authToken": true, "GITHUB_TOKEN": true, "auth": true, "Authorization": true,
		"oauth2": true, "credentials": true, "api-key": true, "apiKey": true, "APIKey": true,
		"apikey": true, "accesskey": true, "ssl.key": true, "key": true, "keys": true, "api_keys": true,
		"setcookie": true, "passphrase": true,
		"keyboard": false, "keyspace": false, "monkey": false, "author": false, "authority": false,
		"passive": false, "bypass": false, "port": false, "user": false, "host": false, "": false,
		"pid": false, "cwd": false, "HOME": false, "PATH": false, "compass": false,
	} {
		if got := Sensitive(name); got != want {
			t.Errorf("Sensitive(%q) = %v; want %v", name, got, want)
		}
	}
}

// FuzzFinding12_Redact: redaction never panics, keeps the number of arguments, only ever
// replaces text with Mask (what remains is the argument's own text, in order), is idempotent,
// and hides a secret put in any of the rule's positions, whatever its bytes (within what the
// position allows).
func FuzzFinding12_Redact(f *testing.F) {
	f.Add("--db-password=x", "hunter2", "app")
	f.Add("--token", "-dashes", "sh -c")
	f.Add(`{"password": "`, `a"b`, "postgres://u:p@h")
	f.Add("Authorization: Bearer", "x y", "https://a@b/c?token=1&x")
	f.Add("mysql", "-pabc", "--keyboard")
	f.Add("app", "--token", "x")
	f.Fuzz(func(t *testing.T, a, secret, c string) {
		in := []string{a, secret, c}
		out := Args(in)
		if len(out) != len(in) {
			t.Fatalf("Args(%q) = %q: %d arguments", in, out, len(out))
		}
		for i := range in {
			if !onlyMasked(in[i], out[i]) {
				t.Fatalf("Args(%q)[%d] = %q: not the argument with parts replaced by %s", in, i, out[i], Mask)
			}
		}
		if again := Args(out); !slices.Equal(again, out) {
			t.Fatalf("Args(Args(%q)) = %q; want %q", in, again, out)
		}
		if s := Arg(a); !onlyMasked(a, s) {
			t.Fatalf("Arg(%q) = %q", a, s)
		}

		// The secret in each position of the rule.
		check := func(args []string, want ...string) {
			t.Helper()
			if got := Args(args); !slices.Equal(got, want) {
				t.Fatalf("Args(%q) = %q; want %q", args, got, want)
			}
		}
		check([]string{"app", "--db-password=" + secret}, "app", "--db-password=***")
		// A value that is itself a sensitive option masks the next argument too (the option
		// before it may have been a switch, as in --no-auth --token x).
		after := "--port"
		if _, p := scan(secret); p == pendMask {
			after = Mask
		}
		check([]string{"app", "--password", secret, "--port"}, "app", "--password", "***", after)
		check([]string{"app", "PGPASSWORD=" + secret}, "app", "PGPASSWORD=***")
		word := !strings.ContainsAny(secret, " \t\n\r\v\f") && secret != "" && secret[0] != '"' && secret[0] != '\''
		if word && !strings.ContainsAny(secret, "&;,") {
			check([]string{"curl", "https://h/p?x=1&api_key=" + secret + "&y=2"}, "curl", "https://h/p?x=1&api_key=***&y=2")
			check([]string{"psql", "host=h password=" + secret + " dbname=x"}, "psql", "host=h password=*** dbname=x")
		}
		if word {
			check([]string{"sh", "-c", "app --token " + secret + " --port 1"}, "sh", "-c", "app --token *** "+after+" 1")
		}
		if !strings.ContainsAny(secret, "/?#@\"' \t\n\r\v\f") && secret != "" {
			check([]string{"app", "postgres://u:" + secret + "@db/x"}, "app", "postgres://u:***@db/x")
		}
		if strings.IndexByte(secret, '"') < 0 && strings.IndexByte(secret, '\\') < 0 && utf8.ValidString(secret) {
			check([]string{"app", `{"secret": "` + secret + `", "n": 1}`}, "app", `{"secret": "***", "n": 1}`)
		}
		if !strings.ContainsAny(secret, " \t\n\r\v\f") && secret != "" {
			check([]string{"curl", "-H", "Authorization: Bearer " + secret}, "curl", "-H", "Authorization: ***")
		}
	})
}

// onlyMasked reports whether out is in with zero or more of its parts replaced by Mask.
func onlyMasked(in, out string) bool {
	if out == in {
		return true
	}
	if !strings.Contains(out, Mask) {
		return false
	}
	parts := strings.Split(out, Mask)
	rest := in
	for i, p := range parts {
		k := strings.Index(rest, p)
		if k < 0 || i == 0 && k != 0 {
			return false
		}
		rest = rest[k+len(p):]
	}
	return parts[len(parts)-1] == "" || strings.HasSuffix(in, parts[len(parts)-1])
}

// BenchmarkArgs redacts a typical command line with nothing to hide (no allocation) and one
// with a password.
func BenchmarkArgs(b *testing.B) {
	clean := []string{"/usr/lib/postgresql/16/bin/postgres", "-D", "/var/lib/postgresql/16/main", "-c", "config_file=/etc/postgresql/16/main/postgresql.conf"}
	secret := []string{"/usr/bin/app", "--listen=:8080", "--db-password=hunter2", "--log-level", "info"}
	b.Run("clean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Args(clean)
		}
	})
	b.Run("secret", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Args(secret)
		}
	})
}
