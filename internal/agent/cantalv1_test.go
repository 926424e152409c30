package agent

import (
	"net/http/httptest"
	"testing"

	"github.com/cantal-go/cantal/internal/access"
)

// TestOriginalAPIRoles: the original Cantal API's POST /query (any suffix) only reads and needs
// the read role; POST /add_host joins a peer and needs the write role, as POST /api/v1/peers.
func TestOriginalAPIRoles(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         access.Role
	}{
		{"POST", "/query", access.Read},
		{"POST", "/query.cbor", access.Read},
		{"POST", "/query.json", access.Read},
		{"POST", "/add_host", access.Write},
		{"POST", "/add_host.json", access.Write},
		{"GET", "/all_metrics", access.Read},
		{"POST", "/querything", access.Write},
		{"PUT", "/query", access.Write},
	} {
		if got := needRole(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("needRole(%s %s) = %v; want %v", c.method, c.path, got, c.want)
		}
	}
}
