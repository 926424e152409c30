package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// TestTargets checks /api/v1/targets: the groups of Server.Targets as Prometheus's
// http_sd_configs reads them (a JSON array of {targets, labels}), [] without them, GET only.
func TestTargets(t *testing.T) {
	groups := []apiwire.TargetGroup{
		{Targets: []string{"10.0.0.1:22682"}, Labels: map[string]string{"node": "a", "cluster": "prod"}},
		{Targets: []string{"10.0.0.2:22682"}, Labels: map[string]string{"node": "b", "cluster": "prod"}},
	}
	for _, tc := range []struct {
		targets func() []apiwire.TargetGroup
		want    string
	}{
		{func() []apiwire.TargetGroup { return groups }, `[{"targets":["10.0.0.1:22682"],"labels":{"cluster":"prod","node":"a"}},{"targets":["10.0.0.2:22682"],"labels":{"cluster":"prod","node":"b"}}]`},
		{nil, `[]`},
		{func() []apiwire.TargetGroup { return nil }, `[]`},
	} {
		mux := http.NewServeMux()
		(&Server{Targets: tc.targets}).Register(mux)
		ts := httptest.NewServer(mux)
		res, err := http.Get(ts.URL + "/api/v1/targets")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
		}
		var got, want any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		json.Unmarshal([]byte(tc.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("answer %s; want %s", body, tc.want)
		}
		res, _ = http.Post(ts.URL+"/api/v1/targets", "application/json", nil)
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d; want 405", res.StatusCode)
		}
		res.Body.Close()
		ts.Close()
	}
}
