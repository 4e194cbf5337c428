//go:build unix

package serve_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/benchutil"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// BenchmarkChatTurns: 4 chats at once, each 6 turns (a 128-token system prompt, then 64 new
// user tokens and an answer of at most 32 tokens a turn, every turn's prompt the whole
// conversation so far), through one server with the prefix cache and one without, in the same
// run: the sampled tokens a second of each (wall time, and the process's CPU time, steadier on
// a shared machine), their ratios, and the share of prompt tokens the cache gave. The two
// servers' answers must be equal.
func BenchmarkChatTurns(b *testing.B) {
	dir := tinytokModel(b, hf.InitSpec{Arch: "qwen2", Hidden: 256, Layers: 4, Heads: 4, KVHeads: 2, Intermediate: 1024, MaxPositions: 1024}, 5)
	const chats, turns, system, user, answer = 4, 6, 128, 64, 32
	var secs, cpu [2]float64
	var toks, prompt, cached [2]int
	var last [2][][]int32
	for b.Loop() {
		for k, bytes := range []int64{0, -1} {
			hist, n, p, c, wall, used := chatRun(b, dir, bytes, chats, turns, system, user, answer)
			secs[k] += wall
			cpu[k] += used
			toks[k] += n
			prompt[k] += p
			cached[k] += c
			last[k] = hist
		}
		for i := range chats {
			if !slices.Equal(last[0][i], last[1][i]) {
				b.Fatalf("chat %d: the conversations over the cache and without it differ", i)
			}
		}
	}
	on, off := float64(toks[0])/secs[0], float64(toks[1])/secs[1]
	b.ReportMetric(on, "tokens/s-cache")
	b.ReportMetric(off, "tokens/s-nocache")
	b.ReportMetric(on/off, "ratio")
	b.ReportMetric(cpu[1]/cpu[0], "cpu-ratio")
	b.ReportMetric(float64(cached[0])/float64(prompt[0]), "cached-share")
	b.Logf("%d chats × %d turns: %d sampled tokens, %d prompt tokens; cache on %.1f tokens/s, %.1f CPU s (%d prompt tokens from the cache), off %.1f tokens/s, %.1f CPU s: %.2f× wall, %.2f× CPU",
		chats, turns, toks[0], prompt[0], on, cpu[0], cached[0], off, cpu[1], on/off, cpu[1]/cpu[0])
}

// chatRun plays the chats through a fresh server with PrefixCacheBytes bytes and returns each
// chat's conversation, the tokens sampled, the prompt tokens sent, those the cache gave, and
// the wall and CPU seconds the chats took (the server's start left out).
func chatRun(b *testing.B, dir string, bytes int64, chats, turns, system, user, answer int) (hist [][]int32, sampled, sent, fromCache int, wall, cpu float64) {
	b.Helper()
	_, url, stop := stagetest.ServeUntil(b, serve.Options{HF: dir, Name: "m", Poll: -1, PrefixCacheBytes: bytes})
	defer stop()
	t0, c0 := time.Now(), benchutil.CPUSeconds()
	hist = make([][]int32, chats)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			words := func(n int) []int32 {
				out := make([]int32, n)
				for j := range out {
					out[j] = int32(3 + r.IntN(200))
				}
				return out
			}
			h := words(system)
			for turn := range turns {
				h = append(h, words(user)...)
				tr := ask(b, url, "m", h, 100*i+turn, answer)
				mu.Lock()
				sampled, sent, fromCache = sampled+len(tr.toks), sent+len(h), fromCache+tr.cached
				mu.Unlock()
				h = append(h, tr.toks...)
			}
			hist[i] = h
		}()
	}
	wg.Wait()
	wall, cpu = time.Since(t0).Seconds(), benchutil.CPUSeconds()-c0
	if b.Failed() || sampled == 0 {
		b.Fatalf("a request failed (%d tokens sampled)", sampled)
	}
	return hist, sampled, sent, fromCache, wall, cpu
}
