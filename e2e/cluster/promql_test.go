package cluster

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promAnswer is a /cluster/prometheus instant query's answer.
type promAnswer struct {
	Status   string   `json:"status"`
	Error    string   `json:"error"`
	Warnings []string `json:"warnings"`
	Data     struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// pairs is the answer as sorted "labels=value" lines.
func (a promAnswer) pairs() []string {
	var out []string
	for _, r := range a.Data.Result {
		var ls []string
		for k, v := range r.Metric {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		out = append(out, strings.Join(ls, ",")+" "+fmt.Sprint(r.Value[1]))
	}
	slices.Sort(out)
	return out
}

func (n *node) promQuery(q string, at time.Time) (promAnswer, error) {
	var a promAnswer
	err := n.get("/cluster/prometheus/api/v1/query?"+url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode(), &a)
	return a, err
}

// TestClusterPromQLSameFromEveryNode: on a 3-node cluster, sum by (node) and topk across the
// nodes, asked of each node's /cluster/prometheus at the same time, give the same answer,
// naming all three nodes, with no warning; with c cut off, a's answer names c in its warnings.
func TestClusterPromQLSameFromEveryNode(t *testing.T) {
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	lab := newLab(t, 3, "10.77.34")
	nodes := startNodes(t, lab)
	a, c := nodes[0], nodes[2]
	formCluster(t, nodes, 20*time.Second, 20*time.Second)

	queries := []string{
		`sum by (node) (node_load1)`,
		`topk(2, sum by (node) (rate(node_cpu_seconds_total[10s])))`,
		`count by (node, instance) (node_cpu_seconds_total)`,
	}
	var at time.Time
	waitFor(t, 30*time.Second, func() error {
		// A time every node has scanned past (1 s interval): each node asked then reads the
		// same points.
		at = time.Now().Add(-3 * time.Second)
		for _, q := range queries {
			var first []string
			for _, n := range nodes {
				ans, err := n.promQuery(q, at)
				if err != nil {
					return err
				}
				if ans.Status != "success" || len(ans.Warnings) > 0 {
					return fmt.Errorf("%s at %s: %s %s %q", q, n.name, ans.Status, ans.Error, ans.Warnings)
				}
				got := ans.pairs()
				want := 3
				if strings.HasPrefix(q, "topk(2") {
					want = 2
				}
				if len(got) != want {
					return fmt.Errorf("%s at %s: %d series, want %d: %q", q, n.name, len(got), want, got)
				}
				if first == nil {
					first = got
				} else if !slices.Equal(got, first) {
					return fmt.Errorf("%s: %s answers %q, %s answered %q", q, n.name, got, nodes[0].name, first)
				}
			}
			t.Logf("%s: %q", q, first)
		}
		return nil
	})
	ans, err := a.promQuery(`sum by (node) (node_load1)`, at)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ans.pairs() {
		if !strings.HasPrefix(p, "node=a ") && !strings.HasPrefix(p, "node=b ") && !strings.HasPrefix(p, "node=c ") {
			t.Errorf("sum by (node): %q", p)
		}
	}

	ctx := context.Background()
	if err := c.host.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.host.Heal(ctx)
	var last promAnswer
	took := waitFor(t, 30*time.Second, func() error {
		var err error
		last, err = a.promQuery(`sum by (node) (node_load1)`, time.Now().Add(-2*time.Second))
		if err != nil {
			return err
		}
		for _, w := range last.Warnings {
			if strings.Contains(w, "node c left out") {
				return nil
			}
		}
		return fmt.Errorf("no warning for c: %q %q", last.Warnings, last.pairs())
	})
	t.Logf("MEASURE c cut: named in a's warnings after %s: %q; answer %q", took.Round(time.Millisecond), last.Warnings, last.pairs())
	for _, p := range last.pairs() {
		if strings.HasPrefix(p, "node=c ") {
			t.Errorf("c's series while cut: %q", p)
		}
	}
	if len(last.pairs()) != 2 {
		t.Errorf("a and b while c is cut: %q", last.pairs())
	}
}
