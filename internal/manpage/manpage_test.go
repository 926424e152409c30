package manpage

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/agent"
	"github.com/cantal-go/cantal/internal/cli"
)

var page = Page{Version: "1.2.3", Date: "2026-11-27"}

// need returns the path of a program the test runs (scripts/install-deps.sh test installs
// them); its absence is a failure, not a skip.
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not installed (sh scripts/install-deps.sh test): %v", prog, err)
	}
	return p
}

func TestAgentPageNamesEveryFlag(t *testing.T) {
	text := string(Agent(page))
	n := 0
	agent.FlagSet().VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(text, ".B "+Option(f.Name)+"\n") && !strings.Contains(text, ".B "+Option(f.Name)+` "`) {
			t.Errorf("cantal-agent(8) lacks %s", f.Name)
		}
	})
	if n < 40 {
		t.Fatalf("only %d flags", n)
	}
}

func TestCLIPageNamesEveryCommandsFlags(t *testing.T) {
	text := string(CLI(page))
	for _, c := range cli.Reference() {
		head := ".B cantal " + esc(c.Name) + "\n"
		i := strings.Index(text, head)
		if i < 0 {
			t.Errorf("cantal(1) lacks the command %s", c.Name)
			continue
		}
		entry, _, _ := strings.Cut(text[i+len(head):], "\n")
		listed := strings.Split(entry, ", ")
		for _, f := range c.Flags {
			if !slices.Contains(listed, flagName(f)) {
				t.Errorf("cantal(1): %s lacks %s (entry %q)", c.Name, f, entry)
			}
		}
	}
}

// TestPagesFormatWithoutWarnings runs groff on each page with every warning on: a page that
// man(1) would show wrongly fails here.
func TestPagesFormatWithoutWarnings(t *testing.T) {
	groff := need(t, "groff")
	for name, text := range map[string][]byte{"cantal-agent.8": Agent(page), "cantal.1": CLI(page)} {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = bytes.NewReader(text)
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("%s: groff: %v\n%s", name, err, out)
		}
		cmd = exec.Command(groff, "-man", "-Tutf8")
		cmd.Stdin = bytes.NewReader(text)
		out, err = cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		plain := string(bytes.ReplaceAll(out, []byte("\b"), nil))
		if name == "cantal-agent.8" && !strings.Contains(plain, "--remote-write-config") {
			t.Errorf("%s as shown lacks --remote-write-config:\n%s", name, plain)
		}
	}
}

// complete runs the bash completion as bash's programmable completion would for words, the
// last being the one completed, and returns the candidates.
func complete(t *testing.T, bash, script string, words ...string) []string {
	t.Helper()
	var arr strings.Builder
	for _, w := range words {
		arr.WriteString(" '" + w + "'")
	}
	prog := ". " + script + "; COMP_WORDS=(" + arr.String() + "); COMP_CWORD=" +
		string(rune('0'+len(words)-1)) + "; _cantal; printf '%s\\n' \"${COMPREPLY[@]}\""
	out, err := exec.Command(bash, "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

func TestBashCompletion(t *testing.T) {
	bash := need(t, "bash")
	script := filepath.Join(t.TempDir(), "cantal")
	if err := os.WriteFile(script, Bash(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"cantal", "hi"}, []string{"history"}},
		{[]string{"cantal", "cluster", "st"}, []string{"stats"}},
		{[]string{"cantal", "history", "--w"}, []string{"--window"}},
		{[]string{"cantal", "cluster", "stats", "--no"}, []string{"--node"}},
		{[]string{"cantal", "top", "--sort", ""}, []string{"pid", "cpu", "rss"}},
		{[]string{"cantal", "status", "--w"}, nil},
	} {
		got := complete(t, bash, script, tc.words...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.words, got, tc.want)
		}
	}
	// Every flag of every command is offered after its command.
	for _, c := range cli.Reference() {
		words := append(strings.Fields("cantal "+c.Name), "-")
		got := complete(t, bash, script, words...)
		for _, f := range dashed(c.Flags) {
			if !slices.Contains(got, f) {
				t.Errorf("%s: %s not offered (got %q)", c.Name, f, got)
			}
		}
	}
}

func TestZshCompletionParses(t *testing.T) {
	zsh := need(t, "zsh")
	script := filepath.Join(t.TempDir(), "_cantal")
	if err := os.WriteFile(script, Zsh(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	text := string(Zsh())
	for _, c := range cli.Reference() {
		if !strings.Contains(text, "(\""+c.Name+"\") compadd -- "+strings.Join(dashed(c.Flags), " ")+" ;;") {
			t.Errorf("zsh completion lacks %s's flags", c.Name)
		}
	}
}

// TestEscapesNonASCII: a help text outside ASCII reaches roff as groff's Unicode escapes.
func TestEscapesNonASCII(t *testing.T) {
	if got, want := esc("off — 5 µs"), `off \[u2014] 5 \[u00B5]s`; got != want {
		t.Errorf("esc = %q; want %q", got, want)
	}
}
