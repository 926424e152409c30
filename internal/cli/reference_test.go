package cli

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReferenceNamesEveryCommand: every command the usage text lists at the start of a line is
// in the reference, and each one the reference names is one the parser accepts.
func TestReferenceNamesEveryCommand(t *testing.T) {
	var names []string
	for _, c := range Reference() {
		if _, ok := commandSpec(c.Name); !ok {
			t.Errorf("reference names %q, which the parser does not know", c.Name)
		}
		if len(c.Flags) == 0 {
			t.Errorf("%s: no flags", c.Name)
		}
		names = append(names, c.Name)
	}
	re := regexp.MustCompile(`(?m)^  ((?:cluster )?[a-z]+)\b`)
	for _, m := range re.FindAllStringSubmatch(Usage(), -1) {
		n := m[1]
		if n == "version" || n == "cluster" {
			continue
		}
		if !slices.Contains(names, n) {
			t.Errorf("usage lists %q, the reference does not", n)
		}
	}
	for _, c := range Reference() {
		if c.Name == "history" && !slices.Contains(c.Flags, "window") {
			t.Errorf("history flags %v lack window", c.Flags)
		}
		if strings.HasPrefix(c.Name, "cluster") && !slices.Contains(c.Flags, "node") {
			t.Errorf("%s flags %v lack node", c.Name, c.Flags)
		}
	}
}
