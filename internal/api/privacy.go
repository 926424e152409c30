package api

import (
	"context"

	"github.com/cantal-go/cantal/internal/series"
)

// SeriesVisible returns the predicate that tells which series the caller in ctx may see, or nil
// when it may see every series. Per-process series (those with a pid label) are visible only
// when the caller may see that process (access.Caller.SeesProcess, with the process's uid from
// Server.ProcessUID).
func (s *Server) SeriesVisible(ctx context.Context) func(series.Labels) bool {
	return nil // TODO(privacy): filled in by the hidepid work
}
