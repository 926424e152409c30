// Command cantal queries a cantal-agent (status, processes, metrics, history, stats, peers, the
// cluster routes, and top: a live view of the node) over HTTP, HTTPS (with a CA, a client
// certificate or a basic-auth user) or its Unix socket, and reads an application's metrics
// straight from its shared-memory files (values). Run `cantal help` for usage; the logic lives
// in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cantal-go/cantal/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&cli.CLI{Stdout: os.Stdout, Stderr: os.Stderr}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
