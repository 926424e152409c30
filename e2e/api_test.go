package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartKeepsHistory: SIGTERM writes the snapshot; the restarted agent answers for the
// points taken before.
func TestRestartKeepsHistory(t *testing.T) {
	serial(t)
	a := startAgent(t)
	startProc(t, []string{"CANTAL_PATH=" + filepath.Join(t.TempDir(), "app")}, nil, filepath.Join(bin, "testapp"))
	var before []Series
	waitFor(t, 10*time.Second, func() error {
		var err error
		before, err = a.series("/api/v1/history?window=10m", `{metric="requests.number", process="testapp"}`)
		if err != nil {
			return err
		}
		if len(before) != 1 || len(before[0].Points) < 4 {
			return fmt.Errorf("history = %v; want one series with 4 points", before)
		}
		return nil
	})
	a.stop(syscall.SIGTERM)
	a.start()
	after, err := a.series("/api/v1/history?window=10m", before[0].labelSelector())
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 {
		t.Fatalf("after restart: %v; want the series", after)
	}
	have := map[[2]float64]bool{}
	for _, p := range after[0].Points {
		have[p] = true
	}
	for _, p := range before[0].Points {
		if !have[p] {
			t.Errorf("point %v lost across the restart", p)
		}
	}
}

func (s Series) labelSelector() string {
	var parts []string
	for k, v := range s.Labels {
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestBadRequests: malformed requests get a 4xx with a JSON reason.
func TestBadRequests(t *testing.T) {
	serial(t)
	a := startAgent(t)
	for _, tc := range []struct {
		method, path, body string
		code               int
		reason             string
	}{
		{"GET", "/api/v1/metrics?match=" + "%7Bmetric%3D", "", 400, "match"},
		{"GET", "/api/v1/history?window=forever", "", 400, "window"},
		{"GET", "/api/v1/history?window=-1m", "", 400, "window"},
		{"GET", "/api/v1/history?window=1000h", "", 400, "history"},
		{"GET", "/api/v1/stats?fn=sqrt", "", 400, "fn"},
		{"GET", "/api/v1/nothing", "", 404, "no such"},
		{"DELETE", "/api/v1/status", "", 405, "not allowed"},
		{"POST", "/api/v1/peers", "{not json", 400, "body"},
		{"POST", "/api/v1/peers", `{"addr":"127.0.0.1:1"}`, 409, "cluster-name"},
	} {
		code, body := a.raw(tc.method, tc.path, tc.body)
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.code || !strings.Contains(e.Error, tc.reason) {
			t.Errorf("%s %s = %d %s; want %d with an error mentioning %q", tc.method, tc.path, code, body, tc.code, tc.reason)
		}
	}
}

// TestMachineSeries: the machine's own series are there with sane values.
func TestMachineSeries(t *testing.T) {
	quiet(t)
	a := startAgent(t)
	waitFor(t, 5*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{metric=~"cpu.*"}`)
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			return fmt.Errorf("no cpu series")
		}
		return nil
	})
	var st struct {
		Counts struct {
			Series, Processes int
		}
	}
	if err := a.get("/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	if st.Counts.Processes < 5 || st.Counts.Series < 50 {
		t.Errorf("status counts = %+v; want at least 5 processes and 50 series", st.Counts)
	}
}
