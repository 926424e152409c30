package api

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// ContainerMatch selects the series /api/v1/containers is made of: every cgroup series of a
// container the agent named (procscan labels them with container_id, see docs/containers.md).
const ContainerMatch = `{metric=~"cgroup\\..*",container_id!=""}`

var containerSel = selector.MustParse(ContainerMatch)

// containerFigures maps a cgroup series to the member of a Container row it fills: a level's
// latest value or a counter's rate. Series of one metric that differ in other labels (a
// device, an interface) are summed. A resource collected per container later is a line here
// and a member of apiwire.Container.
var containerFigures = map[string]func(c *apiwire.Container, s *series.Sample){
	"cgroup.cpu.usage_ms":          func(c *apiwire.Container, s *series.Sample) { c.CPUPercent += apiwire.StdFloat(s.Rate / 10) },
	"cgroup.cpu.periods":           func(c *apiwire.Container, s *series.Sample) { c.CPUPeriods += apiwire.StdFloat(s.Rate) },
	"cgroup.cpu.throttled_periods": func(c *apiwire.Container, s *series.Sample) { c.CPUThrottled += apiwire.StdFloat(s.Rate) },
	"cgroup.cpu.throttled_ms":      func(c *apiwire.Container, s *series.Sample) { c.CPUThrottledMs += apiwire.StdFloat(s.Rate) },
	"cgroup.memory.usage":          func(c *apiwire.Container, s *series.Sample) { c.MemoryUsage += level(s) },
	"cgroup.memory.working_set":    func(c *apiwire.Container, s *series.Sample) { c.MemoryWorkingSet += level(s) },
	"cgroup.memory.anon":           func(c *apiwire.Container, s *series.Sample) { c.MemoryRSS += level(s) },
	"cgroup.memory.file":           func(c *apiwire.Container, s *series.Sample) { c.MemoryCache += level(s) },
	"cgroup.memory.limit":          func(c *apiwire.Container, s *series.Sample) { c.MemoryLimit += level(s) },
	"cgroup.memory.oom":            func(c *apiwire.Container, s *series.Sample) { c.OOMEvents += level(s) },
	"cgroup.memory.oom_kill":       func(c *apiwire.Container, s *series.Sample) { c.OOMKills += level(s) },
	"cgroup.processes":             func(c *apiwire.Container, s *series.Sample) { c.Processes += int(level(s)) },
	"cgroup.io.read_bytes":         func(c *apiwire.Container, s *series.Sample) { addRate(&c.IOReadRate, s) },
	"cgroup.io.write_bytes":        func(c *apiwire.Container, s *series.Sample) { addRate(&c.IOWriteRate, s) },
	"cgroup.net.rx.bytes":          func(c *apiwire.Container, s *series.Sample) { addRate(&c.NetRxRate, s) },
	"cgroup.net.tx.bytes":          func(c *apiwire.Container, s *series.Sample) { addRate(&c.NetTxRate, s) },
}

// level is a level's or counter's value as a count (negative and NaN: 0).
func level(s *series.Sample) uint64 {
	if f := s.Float(); f > 0 {
		return uint64(f)
	}
	return 0
}

func addRate(p **apiwire.StdFloat, s *series.Sample) {
	if *p == nil {
		*p = new(apiwire.StdFloat)
	}
	**p += apiwire.StdFloat(s.Rate)
}

// ContainerRows makes the rows of /api/v1/containers from the latest samples each calls its
// argument with (the series ContainerMatch selects, of one node). A container is the
// container_id label; its figures are those of its outermost cgroup (the shortest cgroup
// name: a cgroup a container makes inside its own is counted in its parent already), but its
// processes, which are counted per cgroup, are summed over all of them. Rows come in no order.
func ContainerRows(each func(fn func(s *series.Sample))) []apiwire.Container {
	type key struct{ id, cgroup string }
	byCgroup := map[key]*apiwire.Container{}
	each(func(s *series.Sample) {
		fill := containerFigures[s.Labels["metric"]]
		if fill == nil {
			return
		}
		k := key{s.Labels["container_id"], s.Labels["cgroup"]}
		c := byCgroup[k]
		if c == nil {
			l := s.Labels
			c = &apiwire.Container{ID: k.id, Name: l["container"], Image: l["image"], Pod: l["pod"],
				Namespace: l["namespace"], Cgroup: k.cgroup, Node: l["node"]}
			byCgroup[k] = c
		}
		c.TS = max(c.TS, s.TS)
		fill(c, s)
	})
	byID := map[string]*apiwire.Container{}
	procs := map[string]int{}
	for k, c := range byCgroup {
		procs[k.id] += c.Processes
		if o := byID[k.id]; o == nil || len(c.Cgroup) < len(o.Cgroup) || len(c.Cgroup) == len(o.Cgroup) && c.Cgroup < o.Cgroup {
			byID[k.id] = c
		}
	}
	rows := make([]apiwire.Container, 0, len(byID))
	for id, c := range byID {
		c.Processes = procs[id]
		if c.CPUPeriods > 0 {
			c.ThrottledPercent = min(100, c.CPUThrottled/c.CPUPeriods*100)
		}
		rows = append(rows, *c)
	}
	return rows
}

// ContainerQuery is what /api/v1/containers?sort=cpu|mem&limit=N asks: the containers ordered
// by CPU or by memory working set, largest first (by default, and for ties, by name, node and
// id), and only the first Limit (0: all).
type ContainerQuery struct {
	Sort  string // "", "cpu" or "mem"
	Limit int
}

// maxContainerLimit bounds limit=.
const maxContainerLimit = 1 << 16

// ParseContainerQuery reads sort and limit from v; an unknown sort or a limit that is not a
// number from 1 to 65536 is an error naming the parameter.
func ParseContainerQuery(v url.Values) (ContainerQuery, error) {
	var q ContainerQuery
	switch s := v.Get("sort"); s {
	case "", "cpu", "mem":
		q.Sort = s
	default:
		return q, fmt.Errorf("bad sort %q: want cpu or mem", s)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxContainerLimit {
			return q, fmt.Errorf("bad limit %q: want a number from 1 to %d", l, maxContainerLimit)
		}
		q.Limit = n
	}
	return q, nil
}

// SortContainers orders rows as q asks and cuts them to q.Limit; it returns the rows kept.
func SortContainers(rows []apiwire.Container, q ContainerQuery) []apiwire.Container {
	slices.SortFunc(rows, func(a, b apiwire.Container) int {
		switch q.Sort {
		case "cpu":
			if c := cmp.Compare(b.CPUPercent, a.CPUPercent); c != 0 {
				return c
			}
		case "mem":
			if c := cmp.Compare(b.MemoryWorkingSet, a.MemoryWorkingSet); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Node, b.Node), cmp.Compare(a.ID, b.ID))
	})
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	return rows
}

// containers answers /api/v1/containers from the registry's latest values: only the series
// the caller may see (cgroup series have no pid label: every caller sees them).
func (s *Server) containers(w http.ResponseWriter, r *http.Request) {
	q, err := ParseContainerQuery(r.URL.Query())
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	visible := s.SeriesVisible(r.Context())
	rows := ContainerRows(func(fn func(*series.Sample)) {
		s.Registry.View().EachLatest(containerSel, visible, func(_ registry.Handle, smp series.Sample) bool {
			fn(&smp)
			return true
		})
	})
	total := len(rows)
	WriteJSON(w, apiwire.ContainersAnswer{Containers: SortContainers(rows, q), Total: total})
}

// clusterContainers answers /api/v1/cluster/containers: this node's containers from the
// registry and every peer's from its latest values (the Cluster's query of ContainerMatch,
// as cluster/metrics asks it), each row with its node; every node's head says whether it
// answered. An unreachable node's last values are not shown as current: it has no rows.
func (s *Server) clusterContainers(w http.ResponseWriter, r *http.Request) {
	q, err := ParseContainerQuery(r.URL.Query())
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	visible, peerVisible := s.SeriesVisible(r.Context()), s.PeerSeriesVisible(r.Context())
	var rows []apiwire.Container
	nodes := []apiwire.NodeHead{{Node: s.NodeName, Status: string(hub.OK)}}
	if !s.local(w, r, func() {
		rows = ContainerRows(func(fn func(*series.Sample)) {
			s.Registry.View().EachLatest(containerSel, visible, func(_ registry.Handle, smp series.Sample) bool {
				fn(&smp)
				return true
			})
		})
	}) {
		return // no query slot came free (answered)
	}
	for i := range rows {
		rows[i].Node = s.NodeName
	}
	if s.Cluster != nil {
		query := s.Cluster.Query
		if lq, ok := s.Cluster.(LatestQuerier); ok {
			query = lq.QueryLatest
		}
		for _, a := range query(r.Context(), ContainerMatch, true) {
			nodes = append(nodes, apiwire.NodeHead{Node: a.Node, Status: string(a.Status), Since: a.Since, Error: a.Error})
			if a.Status == hub.Unreachable {
				continue
			}
			peer := ContainerRows(func(fn func(*series.Sample)) {
				for i := range a.Series {
					smp := &a.Series[i].Latest
					if smp.TS != 0 && (peerVisible == nil || peerVisible(smp.Labels)) {
						fn(smp)
					}
				}
			})
			for i := range peer {
				peer[i].Node = a.Node
			}
			rows = append(rows, peer...)
		}
	}
	total := len(rows)
	WriteJSON(w, apiwire.ContainersAnswer{Containers: SortContainers(rows, q), Total: total, Nodes: nodes})
}
