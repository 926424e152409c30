package e2e

import (
	"net/url"
	"strings"
	"testing"
)

// checkPrometheusAPIPrivacy: /prometheus shows each caller the series it sees through
// /api/v1 (called by TestHidePIDUserSeesOnlyOwnProcesses): root every process's series, nobody on
// the socket its own process's and not root's, another local user over TCP neither (at most its
// own curl's).
func checkPrometheusAPIPrivacy(t *testing.T, a *agent, sock string, mine, roots *proc) {
	t.Helper()
	series := "/prometheus/api/v1/series?" + url.Values{"match[]": {`{pid=~".+"}`}}.Encode()
	query := "/prometheus/api/v1/query?" + url.Values{"query": {`count by (pid) ({pid=~".+"})`}}.Encode()
	for _, path := range []string{series, query} {
		out, err := unixGet(t, sock, 0, path)
		if err != nil || !strings.Contains(out, `"pid":"`+roots.pid()+`"`) || !strings.Contains(out, `"pid":"`+mine.pid()+`"`) {
			t.Errorf("root's %s lacks a test process: %v: %.300s", path, err, out)
		}
		out, err = unixGet(t, sock, nobody, path)
		if err != nil || !strings.Contains(out, `"status":"success"`) {
			t.Fatalf("nobody's %s: %v: %.300s", path, err, out)
		}
		if strings.Contains(out, `"pid":"`+roots.pid()+`"`) {
			t.Errorf("nobody's %s shows root's process %s", path, roots.pid())
		}
		if !strings.Contains(out, `"pid":"`+mine.pid()+`"`) {
			t.Errorf("nobody's %s lacks its own process %s: %.300s", path, mine.pid(), out)
		}
		code, body := a.tcpAs(otherUID, "GET", path, "")
		if code != 200 || strings.Contains(body, `"pid":"`+roots.pid()+`"`) || strings.Contains(body, `"pid":"`+mine.pid()+`"`) {
			t.Errorf("another user's %s over TCP under hidepid: %d %.300s", path, code, body)
		}
	}
}
