package api

import (
	"net/http"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// registerTargets adds GET /api/v1/targets: Prometheus HTTP service discovery of the cluster
// (read role, as every GET).
func (s *Server) registerTargets(mux *http.ServeMux) {
	handle(mux, "/api/v1/targets", map[string]http.HandlerFunc{"GET": s.targets})
}

// targets answers the http_sd_configs array: one group per live member with its scrape
// address and labels, from Server.Targets; [] when it is nil.
func (s *Server) targets(w http.ResponseWriter, r *http.Request) {
	groups := []apiwire.TargetGroup{}
	if s.Targets != nil {
		if g := s.Targets(); g != nil {
			groups = g
		}
	}
	WriteJSON(w, groups)
}
