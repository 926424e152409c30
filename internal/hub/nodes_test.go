package hub

import (
	"context"
	"testing"
)

func TestWantedMembers(t *testing.T) {
	ms := []Member{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
	if got := wantedMembers(context.Background(), ms); len(got) != 3 {
		t.Errorf("no WithNodes: %d members; want all 3", len(got))
	}
	ctx := WithNodes(context.Background(), func(n string) bool { return n == "n2" })
	got := wantedMembers(ctx, ms)
	if len(got) != 1 || got[0].Name != "n2" || len(ms) != 3 || ms[1].Name != "n2" {
		t.Errorf("WithNodes(n2): %+v (members now %+v); want only n2, members untouched", got, ms)
	}
}
