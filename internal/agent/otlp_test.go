package agent

import (
	"net/http/httptest"
	"testing"

	"github.com/cantal-go/cantal/internal/access"
)

// TestOTLPNeedsWrite: POST /v1/metrics changes state, so it needs the Write role, as /write does.
func TestOTLPNeedsWrite(t *testing.T) {
	for _, path := range []string{"/v1/metrics", "/write"} {
		if got := needRole(httptest.NewRequest("POST", path, nil)); got != access.Write {
			t.Errorf("needRole(POST %s) = %v; want Write", path, got)
		}
	}
}
