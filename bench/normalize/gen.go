package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// ensureDataset returns the committed rollout iteration under root, generating it first if it is
// not there (a committed manifest marks a complete dataset). It returns the row count and the
// bytes of the part files.
func ensureDataset(ctx context.Context, root string, o options) (rows, size int64, err error) {
	b, err := filestore.New(root)
	if err != nil {
		return 0, 0, err
	}
	dir := layout.RolloutDir(runName, iter)
	if m, _, err := commit.Read(ctx, b, dir); err == nil {
		for _, f := range m.Files {
			size += f.Bytes
		}
		return m.Rows, size, nil
	}
	fmt.Printf("generating %d rows in %d parts under %s …\n", o.rows, o.parts, root)
	start := time.Now()
	files := make([]commit.File, o.parts)
	errs := make([]error, o.parts)
	// One goroutine per part, at most GOMAXPROCS at a time: memory is bounded by that many parts.
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for p := 0; p < o.parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			lo, hi := p*o.rows/o.parts, (p+1)*o.rows/o.parts
			rs := genPart(p, hi-lo, o.tokens)
			var buf bytes.Buffer
			if err := shards.WriteTrajectories(&buf, p, rs); err != nil {
				errs[p] = err
				return
			}
			n := int64(len(rs))
			rs = nil
			files[p], errs[p] = commit.PutFile(ctx, b, dir, shards.PartName(p, o.parts), buf.Bytes(), n)
			fmt.Printf("  part %d: %d rows, %.0f MB (%s)\n", p, n, float64(buf.Len())/1e6, time.Since(start).Round(time.Second))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	for _, f := range files {
		rows += f.Rows
		size += f.Bytes
	}
	it := iter
	if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{
		Kind: "rollout", SchemaVersion: shards.SchemaVersion, Run: runName, Iteration: &it,
		Rows: rows, Files: files,
		Params: map[string]string{"generator": "bench/normalize", "tokens": strconv.Itoa(o.tokens), "group_size": "8"},
	}); err != nil {
		return 0, 0, err
	}
	fmt.Printf("generated in %s\n", time.Since(start).Round(time.Second))
	return rows, size, nil
}

// rng is a small xorshift64* generator: token ids are the bulk of the generated data and
// math/rand would dominate generation time.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 2685821657736338717
}

func (r *rng) intn(n int) int { return int((r.next() >> 32) * uint64(n) >> 32) }

var (
	agents  = []string{"router", "searcher", "answerer"}
	sources = []string{"search_1hop", "search_2hop", "math_easy", "math_hard"}
	models  = []string{"m-router", "m-shared", "m-shared"}
	finish  = []string{"stop", "length"}
	prompts = []string{"Question: who founded the company that", "Route: is the information sufficient?", "Answer the question using the passages."}
	answers = []string{"<search>founder of acme</search>", "<answer>Ada Lovelace</answer>", "<route>search</route>", "<route>answer</route>"}
)

// genPart generates about n rows of part p: groups of 8 samples, each sample 1–2 steps of the
// three agents (the last agent skipped in about a fifth of the steps), sorted by (uid, sample,
// step, agent order) with hashed uids as the rollout stage makes them. Token ids average
// `tokens` a row (prompt ≈ 2/3, response ≈ 1/3) with one log-prob per response token.
func genPart(p, n, tokens int) []shards.Row {
	type group struct {
		uid, task string
	}
	// Rows per group ≈ 8 × 1.5 steps × 2.8 agents.
	ng := max(4, int(math.Round(float64(n)/33.6*1.1)))
	groups := make([]group, ng)
	for g := range groups {
		task := fmt.Sprintf("task-%03d-%07d", p, g)
		groups[g] = group{uid: seeds.ID(runName, iter, task), task: task}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].uid < groups[j].uid })
	r := rng(uint64(p)*0x9E3779B97F4A7C15 + 12345)
	rows := make([]shards.Row, 0, n+64)
	// Token arenas: one allocation per 64 Ki rows instead of three per row.
	var ids []int32
	var lps []float32
	take := func(k int) []int32 {
		if len(ids) < k {
			ids = make([]int32, max(k, 64<<10*tokens))
		}
		s := ids[:k:k]
		ids = ids[k:]
		return s
	}
	takeF := func(k int) []float32 {
		if len(lps) < k {
			lps = make([]float32, max(k, 64<<10*tokens/3))
		}
		s := lps[:k:k]
		lps = lps[k:]
		return s
	}
	for gi, g := range groups {
		if len(rows) >= n {
			break
		}
		src := sources[gi%len(sources)]
		hard := r.intn(3) == 0
		for s := 0; s < 8; s++ {
			reward := 0.0
			if r.intn(100) < 45 || (!hard && r.intn(2) == 0) {
				reward = 1
			}
			steps := 1 + r.intn(2)
			traj := g.uid + "-" + strconv.Itoa(s)
			for st := 0; st < steps; st++ {
				for ai, agent := range agents {
					if ai == len(agents)-1 && r.intn(5) == 0 {
						continue
					}
					valid := r.intn(12) != 0
					score := reward
					if !valid {
						score -= 0.01
					}
					np := tokens/3 + r.intn(2*tokens/3+1) // ≈ 2/3 tokens
					nr := 1 + r.intn(2*tokens/3)          // ≈ 1/3 tokens
					prompt := take(np)
					for i := range prompt {
						x := r.next()
						prompt[i] = int32(x>>52) ^ int32(x>>40)&0x3ff // skewed ids < 4096
					}
					resp := take(nr)
					lp := takeF(nr)
					for i := range resp {
						x := r.next()
						resp[i] = int32(x>>52) ^ int32(x>>40)&0x3ff
						// Mostly confident tokens, some uncertain ones; 1/256 resolution.
						lp[i] = -float32(x&0xff) * float32(x>>8&0xf) / 512
					}
					fr := finish[0]
					if nr > tokens/2 && r.intn(4) == 0 {
						fr = finish[1]
					}
					rows = append(rows, shards.Row{
						Run: runName, Iteration: iter, PolicyVersion: iter - 1,
						DataSource: src, TaskID: g.task, UID: g.uid, TrajUID: traj,
						Sample: int32(s), Step: int32(st), Agent: agent, Model: models[ai],
						PromptIDs: prompt, ResponseIDs: resp, ResponseLogprobs: lp,
						PromptText: prompts[ai], ResponseText: answers[r.intn(len(answers))],
						Valid: valid, Score: score, EpisodeReward: reward, FinishReason: fr,
					})
				}
			}
		}
	}
	for i := range rows {
		rows[i].RowID = shards.RowID(p, i)
	}
	return rows
}
