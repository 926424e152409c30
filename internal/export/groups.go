package export

import (
	"sync"
	"time"
)

// groupState keeps, per process group's counter series, what the group's exited members had
// counted, so that a group's counter never goes down when one of its processes exits (or its
// pid is reused): the exported value is the sum of the live members' counters plus the last
// values of the members gone since. It is shared by the Proms of one handler; begin locks it
// and end unlocks it.
type groupState struct {
	mu     sync.Mutex
	gen    uint64
	groups map[string]*groupCounter
	tr     groupTracker
}

type groupCounter struct {
	offset  float64
	members map[string]*member // by pid
	seen    time.Time
}

type member struct {
	last float64
	gen  uint64
}

// groupTracker is the view of a groupState between begin and end.
type groupTracker struct {
	st  *groupState
	now time.Time
}

// forgetGroupAfter is how long a group's state outlives its last member: after it, a group that
// comes back starts from 0 again (Prometheus has marked its series stale long before).
const forgetGroupAfter = 10 * time.Minute

func newGroupState() *groupState {
	return &groupState{groups: make(map[string]*groupCounter, 64)}
}

// begin locks the state for one exposition.
func (s *groupState) begin() *groupTracker {
	s.mu.Lock()
	s.gen++
	s.tr = groupTracker{st: s, now: time.Now()}
	return &s.tr
}

// member records a live member's counter value v.
func (t *groupTracker) member(key, pid string, v float64) {
	g := t.st.groups[key]
	if g == nil {
		g = &groupCounter{members: make(map[string]*member, 4)}
		t.st.groups[key] = g
	}
	g.seen = t.now
	m := g.members[pid]
	if m == nil {
		m = &member{}
		g.members[pid] = m
	} else if v < m.last { // the pid's series restarted: a new process
		g.offset += m.last
	}
	m.last, m.gen = v, t.st.gen
}

// offset returns what the group's gone members counted.
func (t *groupTracker) offset(key string) float64 {
	if g := t.st.groups[key]; g != nil {
		return g.offset
	}
	return 0
}

// end moves the members not seen in this exposition into their groups' offsets, forgets the
// groups unseen for forgetGroupAfter. The offsets are final after end; the lock is released
// after the caller's last offset call, by done.
func (s *groupState) end(t *groupTracker) {
	for k, g := range s.groups {
		for pid, m := range g.members {
			if m.gen != s.gen {
				g.offset += m.last
				delete(g.members, pid)
			}
		}
		if len(g.members) == 0 && t.now.Sub(g.seen) > forgetGroupAfter {
			delete(s.groups, k)
		}
	}
}

// done releases the state.
func (s *groupState) done() { s.mu.Unlock() }
