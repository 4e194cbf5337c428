package model

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// PrefixCache keeps the KV blocks of the sequences a model has fed (prompts and the tokens
// sampled after them), keyed by their token prefix, so that a later request whose history
// begins with the same tokens (an agent's later turn, which repeats the earlier turns' answers;
// another sample of the group) starts from them instead of prefilling them again (vLLM's
// automatic prefix caching). A block is found by its kvBlockLen tokens and the entry of the
// block before it, so a hit means the whole prefix up to it is equal, token for token; and a
// position's keys and values depend only on the tokens up to it, so a hit draws the same bits
// as a prefill. It holds at most a bounded number of blocks and evicts the least recently used
// first (of one prefix, its last blocks before its first). Requests that hold a block keep it
// after its eviction, until they end.
//
// The cached keys and values are those of the weights that computed them: the owner of a
// cache drops it (or calls Release) when the weights change. Safe for concurrent use.
type PrefixCache struct {
	mu       sync.Mutex
	maxBytes int64
	max      int // blocks; set by the first model that uses the cache
	layers   int
	kvd      int
	entries  map[string]*list.Element // of *prefixEntry
	lru      list.List                // front: most recently used
	next     uint64
	stats    PrefixStats
}

// PrefixStats count a PrefixCache's use.
type PrefixStats struct {
	HitTokens  int64 // positions requests took from the cache
	Blocks     int   // blocks held now
	Evicted    int64 // blocks evicted
	Registered int64 // blocks added
}

type prefixEntry struct {
	id    uint64
	key   string
	block *kvBlock
}

// DefaultPrefixCacheBytes bounds the prefix cache of a served model (actors.Local).
const DefaultPrefixCacheBytes = 1 << 30

// NewPrefixCache is an empty cache holding at most maxBytes of keys and values (at least one
// block).
func NewPrefixCache(maxBytes int64) *PrefixCache {
	return &PrefixCache{maxBytes: maxBytes, entries: map[string]*list.Element{}}
}

// Stats returns the cache's counters.
func (pc *PrefixCache) Stats() PrefixStats {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	s := pc.stats
	s.Blocks = pc.lru.Len()
	return s
}

// Release drops every cached block.
func (pc *PrefixCache) Release() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.entries = map[string]*list.Element{}
	pc.lru.Init()
}

// bind checks that m's caches have the shape of the blocks held, setting it on first use.
func (pc *PrefixCache) bind(m *LLM) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	kvd := m.d.KV * m.d.hd
	if pc.max == 0 {
		pc.layers, pc.kvd = m.d.layers, kvd
		pc.max = max(1, int(pc.maxBytes/int64(2*m.d.layers*kvBlockLen*kvd*4)))
	}
	if pc.layers != m.d.layers || pc.kvd != kvd {
		return fmt.Errorf("model: the prefix cache holds blocks of %d layers × %d floats, the model has %d × %d: use one cache per model",
			pc.layers, pc.kvd, m.d.layers, kvd)
	}
	return nil
}

// blockKey is the key of the block of toks (kvBlockLen tokens) after the entry parent.
func blockKey(parent uint64, toks []int32) string {
	b := make([]byte, 8+4*len(toks))
	binary.LittleEndian.PutUint64(b, parent)
	for i, t := range toks {
		binary.LittleEndian.PutUint32(b[8+4*i:], uint32(t))
	}
	return string(b)
}

// lookup returns the cached blocks of the longest prefix of hist made of whole blocks that
// leaves at least one token of hist to feed (its last row gives the next token's logits).
func (pc *PrefixCache) lookup(hist []int32) []*kvBlock {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var found []*list.Element
	parent := uint64(0)
	for i := 0; (i+1)*kvBlockLen < len(hist); i++ {
		el, ok := pc.entries[blockKey(parent, hist[i*kvBlockLen:(i+1)*kvBlockLen])]
		if !ok {
			break
		}
		found = append(found, el)
		parent = el.Value.(*prefixEntry).id
	}
	blocks := make([]*kvBlock, len(found))
	for i := len(found) - 1; i >= 0; i-- {
		pc.lru.MoveToFront(found[i])
		blocks[i] = found[i].Value.(*prefixEntry).block
	}
	return blocks
}

// hit counts n positions a request took from the cache.
func (pc *PrefixCache) hit(n int) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.stats.HitTokens += int64(n)
}

// register adds the whole blocks of prompt that c holds (c has fed it) and evicts down
// to the bound.
func (pc *PrefixCache) register(prompt []int32, c *kvCache) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	n := min(len(prompt), c.n) / kvBlockLen
	path := make([]*list.Element, n)
	parent := uint64(0)
	for i := range n {
		key := blockKey(parent, prompt[i*kvBlockLen:(i+1)*kvBlockLen])
		el, ok := pc.entries[key]
		if !ok {
			pc.next++
			el = pc.lru.PushFront(&prefixEntry{id: pc.next, key: key, block: c.blocks[i]})
			pc.entries[key] = el
			pc.stats.Registered++
		}
		path[i] = el
		parent = el.Value.(*prefixEntry).id
	}
	for i := n - 1; i >= 0; i-- {
		pc.lru.MoveToFront(path[i])
	}
	for pc.lru.Len() > pc.max {
		el := pc.lru.Back()
		delete(pc.entries, el.Value.(*prefixEntry).key)
		pc.lru.Remove(el)
		pc.stats.Evicted++
	}
}

// PrefixSampler is a policy that can sample over a PrefixCache: the same results as its
// Sample, bit for bit, with the prefill of cached prefixes skipped.
type PrefixSampler interface {
	SampleCached(ctx context.Context, reqs []SampleRequest, opts SampleOptions, pc *PrefixCache) ([]SampleResult, error)
}

var (
	_ PrefixSampler = (*LLM)(nil)
	_ PrefixSampler = (*Model)(nil)
	_ PrefixSampler = (*LoRA)(nil)
)

// SampleCached is Sample over pc (nil: none).
func (m *LLM) SampleCached(ctx context.Context, reqs []SampleRequest, opts SampleOptions, pc *PrefixCache) ([]SampleResult, error) {
	return sampleStreamsCached(ctx, m, reqs, opts, nil, pc)
}

// SampleCached is Sample over pc (nil: none).
func (m *Model) SampleCached(ctx context.Context, reqs []SampleRequest, opts SampleOptions, pc *PrefixCache) ([]SampleResult, error) {
	return sampleStreamsCached(ctx, m.core, reqs, opts, []int32{EOS}, pc)
}

// SampleCached is Sample over pc (nil: none); pc must hold this adapter's blocks only.
func (l *LoRA) SampleCached(ctx context.Context, reqs []SampleRequest, opts SampleOptions, pc *PrefixCache) ([]SampleResult, error) {
	v, _ := l.view(false, 0)
	return v.SampleCached(ctx, reqs, opts, pc)
}

// UsePrefixCache makes a stream that has fed nothing yet start from pc's blocks of its
// prompt and register its blocks there once fed, sampled tokens included (nil: no cache). pc
// must hold blocks of the stream's weights only.
func (s *Stream) UsePrefixCache(pc *PrefixCache) error {
	if s.kv != nil {
		return errors.New("model: UsePrefixCache: the stream has started")
	}
	if pc == nil {
		s.pc = nil
		return nil
	}
	if err := pc.bind(s.m); err != nil {
		return err
	}
	s.pc = pc
	return nil
}
