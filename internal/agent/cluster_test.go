package agent

import (
	"reflect"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/cluster"
)

// TestTargetGroups checks the service-discovery groups: one per member alive or suspect with
// its own node label and the cluster's, the node itself included, dead, departed and
// address-less members left out, sorted by node.
func TestTargetGroups(t *testing.T) {
	self := cluster.Peer{Name: "b", HTTP: "127.0.0.2:22682", Status: cluster.StatusAlive}
	peers := []cluster.Peer{
		{Name: "c", HTTP: "127.0.0.3:22682", Status: cluster.StatusSuspect},
		{Name: "a", HTTP: "127.0.0.1:22682", Status: cluster.StatusAlive},
		{Name: "d", HTTP: "127.0.0.4:22682", Status: cluster.StatusDead},
		{Name: "e", HTTP: "127.0.0.5:22682", Status: cluster.StatusLeft},
		{Name: "f", HTTP: "", Status: cluster.StatusAlive},
		{Name: "g", HTTP: "0.0.0.0:9100", Addr: "10.1.2.3:7946", Status: cluster.StatusAlive},
		{Name: "h", HTTP: "[::]:9100", Addr: "[fd00::7]:7946", Status: cluster.StatusAlive},
	}
	got := targetGroups("prod", self, peers)
	group := func(node, addr string) apiwire.TargetGroup {
		return apiwire.TargetGroup{Targets: []string{addr}, Labels: map[string]string{"node": node, "cluster": "prod"}}
	}
	want := []apiwire.TargetGroup{group("a", "127.0.0.1:22682"), group("b", "127.0.0.2:22682"), group("c", "127.0.0.3:22682"),
		group("g", "10.1.2.3:9100"), group("h", "[fd00::7]:9100")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targetGroups = %+v; want %+v", got, want)
	}
	alone := targetGroups("", self, nil)
	if len(alone) != 1 || !reflect.DeepEqual(alone[0].Labels, map[string]string{"node": "b"}) {
		t.Errorf("without gossip: %+v; want the node alone, no cluster label", alone)
	}
}
