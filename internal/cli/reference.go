package cli

import (
	"flag"
	"sort"
)

// commands are the commands Run knows that take flags, in the order the usage lists them.
// TestReferenceNamesEveryCommand keeps it equal to what commandSpec accepts.
var commands = []string{"status", "processes", "containers", "metrics", "history", "stats", "peers", "top",
	"cluster metrics", "cluster history", "cluster stats", "values"}

// Command is one command of the reference: its name ("cluster stats" for a subcommand) and
// the names of the flags it takes, sorted, without dashes.
type Command struct {
	Name  string
	Flags []string
}

// Reference lists every command and the flags it accepts, read from the flag sets the parser
// itself builds, so that generated documentation (the cantal(1) man page, shell completion)
// cannot drift from the parser. The result is new on each call.
func Reference() []Command {
	out := make([]Command, 0, len(commands))
	c := &CLI{Getenv: func(string) string { return "" }}
	for _, name := range commands {
		sp, _ := commandSpec(name)
		var o options
		var timeout string
		fs := c.flagSet(name, sp, &o, &timeout)
		var flags []string
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
		sort.Strings(flags)
		out = append(out, Command{Name: name, Flags: flags})
	}
	return out
}

// Usage is the text `cantal help` prints.
func Usage() string { return usageText }
