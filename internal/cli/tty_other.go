//go:build !linux

package cli

import (
	"context"
	"io"
)

// promptTerminal returns the default CLI.Password. Off Linux the CLI does not prompt: give the
// password in CANTAL_PASSWORD or --password-file.
func promptTerminal(io.Writer) func(context.Context, string) (string, error) {
	return func(context.Context, string) (string, error) { return "", errNoTerminal }
}
