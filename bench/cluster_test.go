package bench

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/cluster/memnet"
)

// Scale benchmark of cluster membership: N gossip members in one process on an in-memory network
// (internal/cluster/memnet), each a full cluster.Cluster with the agent's memberlist tuning.
//
// Reported per N:
//   - ns/op and s/converge: one new node joins one random member of a converged cluster of N-1;
//     time until every one of the N nodes knows every other (the old ones have an alive event for
//     the new node, and the new node counts N members).
//   - coldstart-s: building the cluster: N fresh nodes each join node 0, until all know all.
//   - gossip-B/s/node and gossip-pkt/s/node: packet traffic per node while converged and idle.
//
// Run (takes a few minutes; each N is built once and reused by every iteration):
//
//	cd bench && go test -run '^$' -bench ClusterConvergence -benchtime 5x -timeout 30m
//
// The gossip model's floor for 1000 nodes is about 2.2 s; the target is 5 s.
func BenchmarkClusterConvergence(b *testing.B) {
	for _, n := range []int{100, 500, 1000} {
		var sim *simCluster
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			if sim == nil {
				var err error
				if sim, err = newSimCluster(n - 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				d, err := sim.joinOne(b)
				if err != nil {
					b.Fatal(err)
				}
				total += d
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/converge")
			b.ReportMetric(sim.coldStart.Seconds(), "coldstart-s") // after ResetTimer, which clears metrics
			b.StopTimer()
			pkts, bytes := sim.idleTraffic(3 * time.Second)
			b.ReportMetric(pkts, "gossip-pkt/s/node")
			b.ReportMetric(bytes, "gossip-B/s/node")
		})
		if sim != nil {
			sim.close()
		}
	}
}

// simCluster is a converged cluster on a memnet network. Node event counters tell when every
// node has seen a given peer become alive.
type simCluster struct {
	net       memnet.Network
	nodes     []*cluster.Cluster
	coldStart time.Duration
	next      int

	mu     sync.Mutex
	watch  string              // id being counted
	seenBy map[string]struct{} // nodes that had an alive event for watch
}

func (s *simCluster) config(id string) (cluster.Config, error) {
	tr, err := s.net.NewTransport("")
	if err != nil {
		return cluster.Config{}, err
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeID, cfg.NodeName, cfg.ClusterName = id, id, "bench"
	cfg.Transport = tr
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnPeer = func(p cluster.Peer) {
		if p.Status != cluster.StatusAlive {
			return
		}
		s.mu.Lock()
		if p.ID == s.watch {
			s.seenBy[id] = struct{}{}
		}
		s.mu.Unlock()
	}
	return cfg, nil
}

func newSimCluster(n int) (*simCluster, error) {
	s := &simCluster{}
	start := time.Now()
	for i := 0; i < n; i++ {
		cfg, err := s.config("n" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		c, err := cluster.New(cfg)
		if err != nil {
			s.close()
			return nil, err
		}
		s.nodes = append(s.nodes, c)
	}
	// Nodes boot in waves, each joining a random node of the ones already in, as agents
	// started with different --peer flags would; one seed answering every push/pull of a
	// 1000-node state at once times out on two shared cores. A failed join is retried.
	joined := []*cluster.Cluster{s.nodes[0]}
	for lo := 1; lo < n; {
		hi := min(n, lo+max(1, len(joined)))
		var wg sync.WaitGroup
		var failed atomic.Int64
		var firstErr atomic.Value
		sem := make(chan struct{}, 2*runtime.GOMAXPROCS(0)) // bounded parallelism
		for _, c := range s.nodes[lo:hi] {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				var err error
				for try := 0; try < 5; try++ {
					if _, err = c.Join(joined[rand.IntN(len(joined))].Local().Addr); err == nil {
						return
					}
				}
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}()
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			s.close()
			return nil, fmt.Errorf("%d joins failed 5 times, first: %v", f, firstErr.Load())
		}
		joined = s.nodes[:hi]
		lo = hi
	}
	if err := s.waitAll(n, 10*time.Minute); err != nil {
		s.close()
		return nil, fmt.Errorf("cold start: %w", err)
	}
	s.coldStart = time.Since(start)
	return s, nil
}

// waitAll waits until every node counts want alive members.
func (s *simCluster) waitAll(want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(s.nodes); {
		if s.nodes[i].NumAlive() == want {
			i++
			continue
		}
		if time.Now().After(deadline) {
			var bad []string
			for _, p := range s.nodes[i].Peers() {
				if p.Status != cluster.StatusAlive {
					bad = append(bad, p.ID+"="+string(p.Status))
				}
			}
			return fmt.Errorf("node %s knows %d of %d after %v; not alive: %v", s.nodes[i].ID(), s.nodes[i].NumAlive(), want, timeout, bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// joinOne adds a node through one random member, measures until all know all, then makes it
// leave again (with b's timer stopped) and waits for the cluster to settle back to its size.
func (s *simCluster) joinOne(b *testing.B) (time.Duration, error) {
	s.next++
	id := "new" + strconv.Itoa(s.next)
	cfg, err := s.config(id)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.watch, s.seenBy = id, make(map[string]struct{})
	s.mu.Unlock()
	c, err := cluster.New(cfg)
	if err != nil {
		return 0, err
	}
	defer c.Shutdown()
	old := len(s.nodes)
	start := time.Now()
	if _, err := c.Join(s.nodes[rand.IntN(old)].Local().Addr); err != nil {
		return 0, err
	}
	deadline := start.Add(2 * time.Minute)
	for s.seen() < old || c.NumAlive() < old+1 {
		if time.Now().After(deadline) {
			var missing []string
			s.mu.Lock()
			for _, n := range s.nodes {
				if _, ok := s.seenBy[n.ID()]; !ok {
					missing = append(missing, n.ID())
				}
			}
			s.mu.Unlock()
			return 0, fmt.Errorf("join of %s: %d of %d nodes know it (missing %v), it knows %d", id, s.seen(), old, missing, c.NumAlive()-1)
		}
		time.Sleep(time.Millisecond)
	}
	d := time.Since(start)
	b.StopTimer()
	defer b.StartTimer()
	if err := c.Leave(5 * time.Second); err != nil {
		return 0, err
	}
	c.Shutdown()
	if err := s.waitAll(old, 2*time.Minute); err != nil {
		return 0, fmt.Errorf("after %s left: %w", id, err)
	}
	return d, nil
}

func (s *simCluster) seen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seenBy)
}

// idleTraffic measures packets and bytes per second per node over d.
func (s *simCluster) idleTraffic(d time.Duration) (pktPerSec, bytesPerSec float64) {
	p0, b0 := s.net.Stats()
	time.Sleep(d)
	p1, b1 := s.net.Stats()
	n := float64(len(s.nodes)) * d.Seconds()
	return float64(p1-p0) / n, float64(b1-b0) / n
}

func (s *simCluster) close() {
	var wg sync.WaitGroup
	for _, c := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Shutdown()
		}()
	}
	wg.Wait()
	s.nodes = nil
}
