package agent

import "testing"

func TestCarbonPrefix(t *testing.T) {
	for _, tc := range []struct{ prefix, node, want string }{
		{"{node}", "web1.example.com", "web1_example_com."},
		{"servers.{node}.cantal", "db 2", "servers.db_2.cantal."},
		{"fixed.", "x", "fixed."},
		{"", "x", ""},
	} {
		if got := carbonPrefix(Config{CarbonPrefix: tc.prefix, NodeName: tc.node}); got != tc.want {
			t.Errorf("carbonPrefix(%q, node %q) = %q; want %q", tc.prefix, tc.node, got, tc.want)
		}
	}
}
