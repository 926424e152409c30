package fleet

import (
	"encoding/json"
	"testing"
)

// TestNodeAnswerDecodes: both cluster routes' answers (as the agent writes them: a NaN point,
// a state, a stale node with since, an unreachable one with an error) decode into NodeAnswer.
func TestNodeAnswerDecodes(t *testing.T) {
	for _, body := range []string{
		`{"nodes":[{"node":"a","status":"ok","series":[{"labels":{"metric":"m","node":"a"},"kind":"float","value":"NaN","ts":5},{"labels":{"metric":"s","node":"a"},"kind":"state","value":"x","ts":5,"text":"x","since":1}]},{"node":"b","status":"unreachable","since":4,"error":"gone","series":[]}],"aggregate":[]}`,
		`{"nodes":[{"node":"a","status":"stale","since":9,"series":[{"labels":{"metric":"m","node":"a"},"kind":"counter","fn":"rate","points":[[1000,1.5],[3000,"NaN"]]}]},{"node":"b","status":"unreachable","since":4,"error":"gone","series":[]}]}`,
	} {
		var ans struct{ Nodes []NodeAnswer }
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
		if len(ans.Nodes) != 2 || ans.Nodes[0].Node != "a" || len(ans.Nodes[0].Series) == 0 || ans.Nodes[0].Series[0].Labels["node"] != "a" ||
			ans.Nodes[1].Status != "unreachable" || ans.Nodes[1].Since != 4 || ans.Nodes[1].Error != "gone" {
			t.Errorf("decoded %+v from %s", ans, body)
		}
	}
}
