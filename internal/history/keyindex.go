package history

import "hash/maphash"

// keyIndex maps series keys to IDs. It is an open-addressing table of 64-bit words, each the
// low 32 bits of the key's hash and 1 + the ID (0: empty), with linear probing and deletion by
// backward shift. A machine where processes come and go registers and deletes millions of
// series an hour; a Go map keyed by the key string leaves tombstones behind every deletion, so
// that looking up a new key (every registration does) probes ever longer, and the collector
// scans its hundreds of thousands of string headers at every cycle. Here deletion leaves no
// tombstone, the table holds no pointer, and the keys themselves are kept once, in the metas.
//
// Not safe for concurrent use: Store guards it with mu (the writer mutates it under the lock
// and reads it without; readers read it under the read lock).
type keyIndex struct {
	seed maphash.Seed
	tab  []uint64
	n    int // IDs held
}

func newKeyIndex() keyIndex { return keyIndex{seed: maphash.MakeSeed()} }

func (x *keyIndex) hash(key string) uint32 { return uint32(maphash.String(x.seed, key)) }

// find returns the ID of key, whose key is read from t.
func (x *keyIndex) find(key string, t *metaTable) (ID, bool) {
	if x.n == 0 {
		return 0, false
	}
	h := x.hash(key)
	mask := uint32(len(x.tab) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := x.tab[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) != h {
			continue
		}
		id := ID(uint32(e) - 1)
		if int(id) < len(t.m) {
			if m := t.m[id].Load(); m != nil && m.key == key {
				return id, true
			}
		}
	}
}

// insert adds id as key's ID; key must not be in the index.
func (x *keyIndex) insert(key string, id ID) {
	if 2*(x.n+1) > len(x.tab) {
		x.grow()
	}
	x.put(uint64(x.hash(key))<<32 | uint64(id+1))
	x.n++
}

func (x *keyIndex) put(e uint64) {
	mask := uint32(len(x.tab) - 1)
	i := uint32(e>>32) & mask
	for x.tab[i] != 0 {
		i = (i + 1) & mask
	}
	x.tab[i] = e
}

func (x *keyIndex) grow() {
	old := x.tab
	x.tab = make([]uint64, max(1024, 2*len(old)))
	for _, e := range old {
		if e != 0 {
			x.put(e)
		}
	}
}

// remove deletes id, registered under key, from the index.
func (x *keyIndex) remove(key string, id ID) {
	if x.n == 0 {
		return
	}
	mask := uint32(len(x.tab) - 1)
	i := x.hash(key) & mask
	for {
		e := x.tab[i]
		if e == 0 {
			return // not there
		}
		if ID(uint32(e)-1) == id {
			break
		}
		i = (i + 1) & mask
	}
	x.n--
	// Backward shift: move up every later entry of the run whose home is not between the
	// hole and it (cyclically), so that no probe ever needs a tombstone.
	for {
		x.tab[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			e := x.tab[j]
			if e == 0 {
				return
			}
			k := uint32(e>>32) & mask
			if i <= j {
				if i < k && k <= j {
					continue
				}
			} else if i < k || k <= j {
				continue
			}
			x.tab[i] = e
			i = j
			break
		}
	}
}

// bytes returns the memory the index holds.
func (x *keyIndex) bytes() int64 { return int64(8 * len(x.tab)) }
