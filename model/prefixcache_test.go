package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestAttendPagedMatchesReference: attention over a cache's blocks gives the bits of the
// contiguous reference at every position 0..3·kvBlockLen+4, across block edges, for head
// dims that the vector kernels take whole (16, 64, 80, 128) and one they leave to Go (6), at
// every kernel level this CPU has (Go, AVX2, AVX-512), over a fork that copied a shared
// partial block before writing into it.
func TestAttendPagedMatchesReference(t *testing.T) {
	defer func(old int) { attnLevel = old }(attnLevel)
	for level := attnLevel; level >= 0; level-- {
		attnLevel = level
		for _, hd := range []int{6, 16, 64, 80, 128} {
			attendPagedMatches(t, level, hd)
		}
	}
}

func attendPagedMatches(t *testing.T, level, hd int) {
	r := rand.New(rand.NewPCG(1, uint64(hd)))
	const layers, n, shared = 2, 3*kvBlockLen + 5, 2*kvBlockLen + 5
	kvd := 2 * hd
	K, V := make([][]float32, layers), make([][]float32, layers)
	for l := range layers {
		K[l], V[l] = make([]float32, n*kvd), make([]float32, n*kvd)
		for i := range K[l] {
			K[l][i], V[l][i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
	}
	put := func(c *kvCache, p0, p1 int) {
		c.reserve(p1 - p0)
		for l := range layers {
			for p := p0; p < p1; p++ {
				c.put(l, p, K[l][p*kvd:][:kvd], V[l][p*kvd:][:kvd])
			}
		}
		c.n = p1
	}
	parent := newKVCache(layers, kvd)
	put(parent, 0, shared)
	c := parent.fork()
	put(c, shared, n)
	// Slots past the last position hold anything: they must not reach the output.
	for l := range layers {
		for e := range kvd {
			c.blocks[n/kvBlockLen].k[l][e*kvBlockLen+kvBlockLen-1] = float32(math.NaN())
		}
	}
	q := make([]float32, hd)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	s1, s2 := make([]float32, n), make([]float32, pagedScratch(n-1))
	for l := range layers {
		for _, off := range []int{0, hd} {
			for p := range n {
				want, got := make([]float32, hd), make([]float32, hd)
				attendCached(q, K[l], V[l], kvd, off, p, 0.4, s1, want)
				for _, cc := range []*kvCache{c, parent} {
					if p >= cc.n {
						continue
					}
					attendPaged(q, cc, l, off, p, 0.4, s2, got)
					if !slices.Equal(got, want) {
						t.Fatalf("kernel level %d, head dim %d, layer %d, offset %d, position %d of %d: paged %v, contiguous %v", level, hd, l, off, p, cc.n, got, want)
					}
				}
			}
		}
	}
}

// TestAttendPagedHeadsMatchesOneHead: the query heads of one KV head attended together give,
// head by head, attendPaged's bits (which TestAttendPagedMatchesReference ties to the
// reference), for 1 to 8 heads (groups of four, three, two and one in the AVX-512 kernels),
// head dims the grouped values kernel takes (64, 128) and ones it leaves to the per-head path
// (16, 80), at every position 0..86 (up to six blocks: the grouped keys kernel's four and a
// remainder) and every kernel level, with NaN in the slots past the last position.
func TestAttendPagedHeadsMatchesOneHead(t *testing.T) {
	defer func(old int) { attnLevel = old }(attnLevel)
	r := rand.New(rand.NewPCG(9, 10))
	const n = 5*kvBlockLen + 7
	for level := attnLevel; level >= 0; level-- {
		attnLevel = level
		for _, hd := range []int{16, 64, 80, 128} {
			kvd := 2 * hd
			c := newKVCache(1, kvd)
			c.reserve(n)
			for p := range n {
				k, v := make([]float32, kvd), make([]float32, kvd)
				for i := range k {
					k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
				}
				c.put(0, p, k, v)
			}
			c.n = n
			for e := range kvd {
				c.blocks[n/kvBlockLen].k[0][e*kvBlockLen+kvBlockLen-1] = float32(math.NaN())
				c.blocks[n/kvBlockLen].v[0][(kvBlockLen-1)*kvd+e] = float32(math.NaN())
			}
			for heads := 1; heads <= 8; heads++ {
				q := make([]float32, heads*hd)
				for i := range q {
					q[i] = float32(r.NormFloat64())
				}
				for p := range n {
					got := make([]float32, heads*hd)
					attendPagedHeads(q, heads, c, 0, hd, p, 0.3, make([]float32, heads*pagedScratch(p)), got)
					for h := range heads {
						want := make([]float32, hd)
						attendPaged(q[h*hd:][:hd], c, 0, hd, p, 0.3, make([]float32, pagedScratch(p)), want)
						if !slices.Equal(got[h*hd:][:hd], want) {
							t.Fatalf("level %d, head dim %d, %d heads, position %d: head %d differs from attendPaged", level, hd, heads, p, h)
						}
					}
				}
			}
		}
	}
}

// TestAttendGroupMatchesAlone: requests forked from one prompt (its whole blocks shared, the
// partial one copied) attending as a group give each request's attendPagedHeads bits, for
// prompts of 4 to 8 shared blocks (one chunk, a chunk and a recomputed tail, two chunks), own
// positions after the prompt from one to three blocks' worth, 1 to 8 heads, head dims the
// grouped values kernel takes and ones it leaves to the per-head path, and every kernel level.
func TestAttendGroupMatchesAlone(t *testing.T) {
	defer func(old int) { attnLevel = old }(attnLevel)
	r := rand.New(rand.NewPCG(11, 12))
	row := func(kvd int) []float32 {
		x := make([]float32, kvd)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	for level := attnLevel; level >= 0; level-- {
		attnLevel = level
		for _, hd := range []int{16, 64, 80} {
			kvd := 2 * hd
			for _, prompt := range []int{64, 70, 100, 128} {
				base := newKVCache(1, kvd)
				base.reserve(prompt)
				for p := range prompt {
					base.put(0, p, row(kvd), row(kvd))
				}
				base.n = prompt
				for _, own := range []int{1, 9, 40} {
					const G = 5
					cs := make([]*kvCache, G)
					for j := range cs {
						cs[j] = base.fork()
						cs[j].reserve(own)
						for t := range own {
							cs[j].put(0, prompt+t, row(kvd), row(kvd))
						}
					}
					p, nbS := prompt+own-1, prompt/kvBlockLen
					if cs[0].blocks[nbS-1] != cs[G-1].blocks[nbS-1] {
						t.Fatalf("prompt %d: the forks do not share block %d", prompt, nbS-1)
					}
					for _, heads := range []int{1, 2, 3, 4, 7, 8} {
						qs, got, want := make([][]float32, G), make([][]float32, G), make([][]float32, G)
						for j := range qs {
							qs[j], got[j], want[j] = make([]float32, heads*hd), make([]float32, heads*hd), make([]float32, heads*hd)
							for i := range qs[j] {
								qs[j][i] = float32(r.NormFloat64())
							}
							attendPagedHeads(qs[j], heads, cs[j], 0, hd, p, 0.3, make([]float32, heads*pagedScratch(p)), want[j])
						}
						attendGroup(qs, got, heads, cs, 0, hd, p, nbS, 0.3, make([]float32, G*heads*pagedScratch(p)))
						for j := range got {
							if i := firstBitDiff(got[j], want[j]); i >= 0 {
								t.Fatalf("level %d, head dim %d, prompt %d, own %d, %d heads: request %d output[%d] = %v, alone %v", level, hd, prompt, own, heads, j, i, got[j][i], want[j][i])
							}
						}
					}
				}
			}
		}
	}
}

// TestGroupedDecodeSameDraws: the samples of two 70- and 100-token prompts decode as groups
// (every step after the shared prefill attends over the prompt's blocks together) and draw
// the tokens and log-probs each draws alone.
func TestGroupedDecodeSameDraws(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	c.Context = 128
	m, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 3, 0.4)
	prompts := archSeqs(c.Vocab, rand.New(rand.NewPCG(13, 14)), [2]int{70, 0}, [2]int{100, 0})
	var reqs []SampleRequest
	for i := range 10 {
		reqs = append(reqs, SampleRequest{Prompt: prompts[i/5].Prompt, Seed: uint64(200 + i)})
	}
	opts := SampleOptions{Temperature: 1, MaxTokens: 6}
	before := groupedRows.Load()
	got, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if g := groupedRows.Load() - before; g < 2*5*(6-1) {
		t.Fatalf("%d rows attended in groups, want at least %d (two groups of five, every decode step)", g, 2*5*(6-1))
	}
	for i, req := range reqs {
		alone, err := m.Sample(context.Background(), []SampleRequest{req}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i].Tokens, alone[0].Tokens) || firstBitDiff(got[i].LogProbs, alone[0].LogProbs) >= 0 {
			t.Fatalf("request %d: grouped %v %v, alone %v %v", i, got[i].Tokens, got[i].LogProbs, alone[0].Tokens, alone[0].LogProbs)
		}
	}
}

// BenchmarkAttendGroup: one decode row each of 8 samples of a 2,048-token prompt (Qwen2.5-0.5B's
// seven query heads of one KV head, 64 dims; each sample 8 own positions), attending as a
// group and one request after another (attendPagedHeads each), on one core. Each of the
// prompt's 2 MB of keys and values (both KV heads) is read once a group or once a request.
func BenchmarkAttendGroup(b *testing.B) {
	const hd, kvd, heads, prompt, own, G = 64, 128, 7, 2048, 8, 8
	r := rand.New(rand.NewPCG(15, 16))
	row := func() []float32 {
		x := make([]float32, kvd)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	base := newKVCache(1, kvd)
	base.reserve(prompt)
	for p := range prompt {
		base.put(0, p, row(), row())
	}
	base.n = prompt
	cs, qs, os := make([]*kvCache, G), make([][]float32, G), make([][]float32, G)
	for j := range cs {
		cs[j] = base.fork()
		cs[j].reserve(own)
		for t := range own {
			cs[j].put(0, prompt+t, row(), row())
		}
		qs[j], os[j] = make([]float32, heads*hd), make([]float32, heads*hd)
		for i := range qs[j] {
			qs[j][i] = float32(r.NormFloat64())
		}
	}
	p := prompt + own - 1
	s := make([]float32, G*heads*pagedScratch(p))
	b.Run("group", func(b *testing.B) {
		for range b.N {
			attendGroup(qs, os, heads, cs, 0, hd, p, prompt/kvBlockLen, 0.125, s)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		for range b.N {
			for j := range qs {
				attendPagedHeads(qs[j], heads, cs[j], 0, hd, p, 0.125, s, os[j])
			}
		}
	})
}

// TestForksShareBlocks: the samples of one 37-token prompt share its two whole blocks (the
// same memory, not copies) and copy only the partial third one as they write; their draws are
// those of each sample alone.
func TestForksShareBlocks(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	m, _ := InitLLM(c, 2)
	randomizeLLM(m, 3, 0.4)
	p := archSeqs(c.Vocab, rand.New(rand.NewPCG(4, 5)), [2]int{37, 0})[0].Prompt
	opts := SampleOptions{Temperature: 1, MaxTokens: 6}
	var ss []*Stream
	for i := range 3 {
		s, err := m.NewStream(SampleRequest{Prompt: p, Seed: uint64(i)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	for !ss[0].Done() {
		if err := Step(context.Background(), ss, StepOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range ss {
		for b := range 2 {
			if s.kv.blocks[b] != ss[0].kv.blocks[b] {
				t.Errorf("sample %d: whole block %d is a copy", i, b)
			}
		}
		if i > 0 && s.kv.blocks[2] == ss[0].kv.blocks[2] {
			t.Errorf("sample %d writes into the partial block of sample 0", i)
		}
		alone, _ := m.Sample(context.Background(), []SampleRequest{{Prompt: p, Seed: uint64(i)}}, opts)
		if g := s.Result(); !slices.Equal(g.Tokens, alone[0].Tokens) || !slices.Equal(g.LogProbs, alone[0].LogProbs) {
			t.Fatalf("sample %d: forked %v %v, alone %v %v", i, g.Tokens, g.LogProbs, alone[0].Tokens, alone[0].LogProbs)
		}
	}
}

// TestPrefixCacheLaterTurn: a first turn fills the cache with a 40-token prompt's blocks; a
// second turn of three requests whose prompts repeat its first 35 tokens and then differ
// draws, over the cache, the same tokens and log-probs as without it, while the model runs
// 32 rows fewer for each of them (two whole blocks found); a third turn of three new prompts
// sharing 20 tokens with each other (none with the cache) prefills their first block once.
func TestPrefixCacheLaterTurn(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	m, _ := InitLLM(c, 2)
	randomizeLLM(m, 3, 0.4)
	r := rand.New(rand.NewPCG(7, 8))
	first := archSeqs(c.Vocab, r, [2]int{40, 0})[0].Prompt
	opts := SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 5}
	pc := NewPrefixCache(1 << 20)
	if _, err := m.SampleCached(context.Background(), []SampleRequest{{Prompt: first, Seed: 1}}, opts, pc); err != nil {
		t.Fatal(err)
	}
	if got := pc.Stats().Blocks; got != 2 {
		t.Fatalf("the cache holds %d blocks after a 40-token prompt, want 2", got)
	}
	later := func(shared []int32, lens ...int) []SampleRequest {
		var reqs []SampleRequest
		for i, n := range lens {
			p := slices.Clone(shared)
			for len(p) < n {
				p = append(p, int32(r.IntN(c.Vocab)))
			}
			reqs = append(reqs, SampleRequest{Prompt: p, Seed: uint64(10 + i)})
		}
		return reqs
	}
	compare := func(name string, reqs []SampleRequest, saved int64) {
		t.Helper()
		before := cachedRows.Load()
		want, err := m.Sample(context.Background(), reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		plain := cachedRows.Load() - before
		got, err := m.SampleCached(context.Background(), reqs, opts, pc)
		if err != nil {
			t.Fatal(err)
		}
		cached := cachedRows.Load() - before - plain
		for i := range reqs {
			if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
				t.Fatalf("%s, request %d: cached %v %v, plain %v %v", name, i, got[i].Tokens, got[i].LogProbs, want[i].Tokens, want[i].LogProbs)
			}
		}
		if plain-cached != saved {
			t.Errorf("%s: the cache saved %d rows (%d against %d), want %d", name, plain-cached, cached, plain, saved)
		}
	}
	hits := pc.Stats().HitTokens
	compare("second turn", later(first[:35], 44, 38, 50), 3*32)
	if got := pc.Stats().HitTokens - hits; got != 3*32 {
		t.Errorf("the second turn took %d positions from the cache, want 96", got)
	}
	third := later(nil, 20)[0].Prompt
	compare("third turn", later(third, 30, 41, 26), 2*16)
}

// TestPrefixCacheBounded: a cache of three blocks keeps three of a 70-token prompt's four
// (its first three: a prefix's last blocks go first), a later request finds those 48 tokens,
// Release empties it, and a model of another shape is refused.
func TestPrefixCacheBounded(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	c.Context = 128
	m, _ := InitLLM(c, 2)
	block := int64(2 * c.Layers * kvBlockLen * c.KVHeads * (c.Hidden / c.Heads) * 4)
	pc := NewPrefixCache(3 * block)
	p := archSeqs(c.Vocab, rand.New(rand.NewPCG(1, 1)), [2]int{70, 0})[0].Prompt
	opts := SampleOptions{Temperature: 1, MaxTokens: 3}
	if _, err := m.SampleCached(context.Background(), []SampleRequest{{Prompt: p, Seed: 1}}, opts, pc); err != nil {
		t.Fatal(err)
	}
	st := pc.Stats()
	if st.Blocks != 3 || st.Evicted != 1 || st.Registered != 4 {
		t.Fatalf("after a 70-token prompt: %+v, want 3 blocks held, 4 registered, 1 evicted", st)
	}
	if _, err := m.SampleCached(context.Background(), []SampleRequest{{Prompt: p[:60], Seed: 2}}, opts, pc); err != nil {
		t.Fatal(err)
	}
	if got := pc.Stats().HitTokens; got != 48 {
		t.Errorf("a later request found %d positions, want 48 (the first three blocks)", got)
	}
	pc.Release()
	if got := pc.Stats().Blocks; got != 0 {
		t.Errorf("%d blocks after Release", got)
	}
	other, _ := InitLLM(tinyArchs()["llama_untied"], 1)
	if _, err := other.SampleCached(context.Background(), []SampleRequest{{Prompt: []int32{1}}}, opts, pc); err == nil || !strings.Contains(err.Error(), "one cache per model") {
		t.Fatalf("another model's shape: %v", err)
	}
}

// attendCached, the reference of attendPaged, writes into o the attention output of query q
// over the keys and values of positions 0..p (rows of K and V with the given stride, the
// head's columns from off), using s (≥ p+1 floats) as scratch.
func attendCached(q, K, V []float32, stride, off, p int, scale float32, s, o []float32) {
	hd := len(q)
	mx := float32(math.Inf(-1))
	for j := 0; j <= p; j++ {
		kj := K[j*stride+off:][:hd]
		var dot float32
		for e, qv := range q {
			dot += qv * kj[e]
		}
		dot *= scale
		s[j] = dot
		if dot > mx {
			mx = dot
		}
	}
	for j := 0; j <= p; j++ {
		s[j] -= mx
	}
	expSpan(s[:p+1])
	var sum float32
	for _, e := range s[:p+1] {
		sum += e
	}
	inv := 1 / sum
	clear(o)
	for j := 0; j <= p; j++ {
		pj := s[j] * inv
		vj := V[j*stride+off:][:hd]
		for e := range o {
			o[e] += pj * vj[e]
		}
	}
}

// BenchmarkAttendPaged: one query head's attention over 560 cached positions (a decode step
// after a 512-token prompt; head dim 64, 2 KV heads), per kernel level.
func BenchmarkAttendPaged(b *testing.B) {
	top := attnLevel
	defer func() { attnLevel = top }()
	const hd, kvd, n = 64, 128, 560
	r := rand.New(rand.NewPCG(3, 4))
	c := newKVCache(1, kvd)
	c.reserve(n)
	row := make([]float32, kvd)
	for p := range n {
		for i := range row {
			row[i] = float32(r.NormFloat64())
		}
		c.put(0, p, row, row)
	}
	c.n = n
	q, o, s := row[:hd], make([]float32, hd), make([]float32, pagedScratch(n-1))
	for level := attnLevel; level >= 0; level-- {
		b.Run([]string{"go", "avx2", "avx512"}[level], func(b *testing.B) {
			attnLevel = level
			for range b.N {
				attendPaged(q, c, 0, hd, n-1, 0.125, s, o)
			}
		})
	}
	// Qwen2.5-0.5B's seven query heads of one KV head, one by one and together.
	const heads = 7
	qs, os, ss := make([]float32, heads*hd), make([]float32, heads*hd), make([]float32, heads*pagedScratch(n-1))
	for i := range qs {
		qs[i] = float32(r.NormFloat64())
	}
	attnLevel = top
	b.Run("7heads/one-by-one", func(b *testing.B) {
		for range b.N {
			for h := range heads {
				attendPaged(qs[h*hd:][:hd], c, 0, hd, n-1, 0.125, s, os[h*hd:][:hd])
			}
		}
	})
	b.Run("7heads/together", func(b *testing.B) {
		for range b.N {
			attendPagedHeads(qs, heads, c, 0, hd, n-1, 0.125, ss, os)
		}
	})
}
