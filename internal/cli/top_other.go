//go:build !linux

package cli

import (
	"context"
	"os"
)

// Off Linux `cantal top` prints one frame (as with --once): it does not drive the terminal.
func isTerminal(*os.File) bool                        { return false }
func termSize(*os.File) (int, int, bool)              { return 0, 0, false }
func rawInput(*os.File) (func(), error)               { return nil, errNoTerminal }
func readKeys(context.Context, *os.File, chan<- byte) {}
