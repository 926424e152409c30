package agent

import "flag"

// FlagSet returns the agent's command line as Load parses it (every flag, its usage text and
// default), bound to a throwaway Config: for generated documentation (the cantal-agent(8) man
// page) that must not drift from the parser. The result is new on each call.
func FlagSet() *flag.FlagSet {
	c := DefaultConfig()
	var version, check bool
	return c.flagSet("cantal-agent", &version, &check)
}
