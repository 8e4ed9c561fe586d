package memory

import "github.com/redlimit/redlimit"

// Slots returns how many keys the store's map holds, empty slots included:
// a test hook to find slots that hold no state.
func (s *Store) Slots() int {
	n := 0
	s.keys.Range(func(_, _ any) bool { n++; return true })
	return n
}

// Audit recounts the store: states, estimated bytes, empty slots in the
// map, slots in the map and slots in the sampler.
func (s *Store) Audit() (states, bytes int64, empty, slots, sampled int) {
	s.keys.Range(func(_, v any) bool {
		sl := v.(*slot)
		sl.mu.Lock()
		slots++
		if sl.head == nil {
			empty++
		} else {
			bytes += keySize(sl.key)
		}
		for e := sl.head; e != nil; e = e.next {
			states++
			bytes += e.size()
		}
		sl.mu.Unlock()
		return true
	})
	for i := range s.sample.shards {
		sh := &s.sample.shards[i]
		sh.mu.Lock()
		sampled += len(sh.slots)
		sh.mu.Unlock()
	}
	return
}

// LogEntries returns how many entries key's sliding log under l holds, and
// its buffer's capacity; 0, 0 without one.
func (s *Store) LogEntries(key string, l redlimit.Limit) (n, capacity int) {
	v, ok := s.keys.Load(key)
	if !ok {
		return 0, 0
	}
	sl := v.(*slot)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if e := sl.find(l.Algorithm, l.Period, l.Calendar); e != nil {
		return e.log.n, cap(e.log.buf)
	}
	return 0, 0
}

// RecordBytes is the estimated size of a token bucket's refund record.
const RecordBytes = recordBytes
