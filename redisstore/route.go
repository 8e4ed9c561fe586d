package redisstore

import (
	"context"
	"strings"
	"sync/atomic"
)

// batchMode says how a backend's decisions can share a batch call.
type batchMode int

const (
	batchNone    batchMode = iota // every decision alone (a go-redis Ring, whose sharding the Store does not know)
	batchOne                      // one server: every decision may share a call
	batchPerSlot                  // Redis Cluster: the decisions of one slot, or of one node (pernode.go)
)

// batchers finds the batcher of a decision.
type batchers struct {
	mode  batchMode
	one   *batcher
	slots []atomic.Pointer[batcher] // batchPerSlot: by slot, made when first used
	nodes *nodeRouter               // batchPerSlot with a backend that reaches nodes: the batchers of nodes
	s     *Store
}

func newBatchers(s *Store) *batchers {
	bs := &batchers{mode: s.b.batching(), s: s}
	if s.noBatching {
		bs.mode = batchNone
	}
	switch bs.mode {
	case batchOne:
		bs.one = &batcher{s: s}
	case batchPerSlot:
		bs.slots = make([]atomic.Pointer[batcher], numSlots)
	}
	if nb, ok := s.b.(nodeBackend); ok && s.b.batching() == batchPerSlot && !s.noNodeBatches {
		bs.nodes = newNodeRouter(s, nb)
	}
	return bs
}

// of returns the batcher of a decision whose keys are in the Cluster slot
// slot (any slot elsewhere), or nil if its decisions go alone. On Cluster
// it is its node's batcher, if the node can take batches of several
// slots. Otherwise it is its slot's.
func (bs *batchers) of(slot int) *batcher {
	switch bs.mode {
	case batchOne:
		return bs.one
	case batchPerSlot:
		if bs.nodes != nil {
			if b := bs.nodes.of(slot); b != nil {
				return b
			}
		}
		p := &bs.slots[slot]
		if b := p.Load(); b != nil {
			return b
		}
		p.CompareAndSwap(nil, &batcher{s: bs.s})
		return p.Load()
	}
	return nil
}

// nodeOf returns the address of the Cluster node that serves slot and
// takes batches of several slots, as far as the Store knows. It waits for
// the first view of the Cluster if there is none yet. It returns "" if no
// node does.
// Only the test hook WithBatchScriptAlways calls it.
func (bs *batchers) nodeOf(ctx context.Context, slot int) string {
	if bs.nodes == nil {
		return ""
	}
	if bs.nodes.topo.Load() == nil {
		bs.nodes.refresh(ctx)
	}
	if b := bs.nodes.of(slot); b != nil {
		return b.node
	}
	return ""
}

// numSlots is the number of Redis Cluster hash slots.
const numSlots = 16384

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag, modulo 16384. The hash tag is the text between the first
// '{' and the next '}', if not empty. Without one, the whole key counts.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % numSlots
}

// crc16Table is the table of CRC16-CCITT (XMODEM), polynomial 0x1021.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
