package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestStreamsJoiningMidwayMatchAlone: requests with different options that join a running
// batch at different steps, their prompts fed a few tokens a step (MaxPrefill), and leave it
// as they finish, draw the same tokens and log-probs, bit for bit, as each decoded alone by
// Sample; two of them share a prompt and join together (a shared prefill).
func TestStreamsJoiningMidwayMatchAlone(t *testing.T) {
	for name, c := range tinyArchs() {
		t.Run(name, func(t *testing.T) {
			m, err := InitLLM(c, 2)
			if err != nil {
				t.Fatal(err)
			}
			randomizeLLM(m, 3, 0.4)
			r := rand.New(rand.NewPCG(4, 5))
			ps := archSeqs(c.Vocab, r, [2]int{9, 0}, [2]int{4, 0}, [2]int{13, 0}, [2]int{1, 0}, [2]int{20, 0})
			type job struct {
				at   int // the step it joins at
				req  SampleRequest
				opts SampleOptions
			}
			jobs := []job{
				{0, SampleRequest{ps[0].Prompt, 1}, SampleOptions{Temperature: 1, MaxTokens: 30}},
				{2, SampleRequest{ps[1].Prompt, 2}, SampleOptions{Temperature: 0.7, TopP: 0.9, MaxTokens: 5}},
				{2, SampleRequest{ps[1].Prompt, 3}, SampleOptions{Temperature: 0.7, TopP: 0.9, MaxTokens: 5}},
				{3, SampleRequest{ps[2].Prompt, 4}, SampleOptions{Temperature: 0, MaxTokens: 8}},
				{7, SampleRequest{ps[3].Prompt, 5}, SampleOptions{Temperature: 1.3, MaxTokens: 4, Stop: []int32{7}}},
				{9, SampleRequest{ps[4].Prompt, 6}, SampleOptions{Temperature: 1, TopP: 0.5}},
			}
			var live []*Stream
			got := make([]*Stream, len(jobs))
			for step := 0; step < 200; step++ {
				for i, j := range jobs {
					if j.at == step {
						s, err := m.NewStream(j.req, j.opts)
						if err != nil {
							t.Fatal(err)
						}
						got[i] = s
						live = append(live, s)
					}
				}
				if err := Step(context.Background(), live, StepOptions{MaxPrefill: 5}); err != nil {
					t.Fatal(err)
				}
				live = slices.DeleteFunc(live, (*Stream).Done)
				if len(live) == 0 && step > 9 {
					break
				}
			}
			for i, j := range jobs {
				alone, err := m.Sample(context.Background(), []SampleRequest{j.req}, j.opts)
				if err != nil {
					t.Fatal(err)
				}
				g := got[i].Result()
				if !got[i].Done() || !slices.Equal(g.Tokens, alone[0].Tokens) || !slices.Equal(g.LogProbs, alone[0].LogProbs) || g.FinishReason != alone[0].FinishReason {
					t.Fatalf("request %d: batched %v %v %s, alone %v %v %s", i, g.Tokens, g.LogProbs, g.FinishReason, alone[0].Tokens, alone[0].LogProbs, alone[0].FinishReason)
				}
			}
		})
	}
}

// TestStepPrefillBudget: with MaxPrefill 4, a stream that is decoding samples a token at
// every step while a 20-token prompt beside it is fed over five steps (4 tokens each), its
// first token sampled at the fifth.
func TestStepPrefillBudget(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	m, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	ps := archSeqs(c.Vocab, rand.New(rand.NewPCG(1, 2)), [2]int{3, 0}, [2]int{20, 0})
	short, _ := m.NewStream(SampleRequest{Prompt: ps[0].Prompt, Seed: 1}, SampleOptions{Temperature: 1, MaxTokens: 40})
	if err := Step(context.Background(), []*Stream{short}, StepOptions{MaxPrefill: 4}); err != nil || short.Len() != 1 {
		t.Fatalf("a 3-token prompt under a budget of 4: %v, %d tokens", err, short.Len())
	}
	long, _ := m.NewStream(SampleRequest{Prompt: ps[1].Prompt, Seed: 2}, SampleOptions{Temperature: 1, MaxTokens: 40})
	before := cachedRows.Load()
	for step := 1; step <= 5; step++ {
		if err := Step(context.Background(), []*Stream{short, long}, StepOptions{MaxPrefill: 4}); err != nil {
			t.Fatal(err)
		}
		if short.Len() != 1+step {
			t.Fatalf("step %d: the decoding stream has %d tokens, want %d", step, short.Len(), 1+step)
		}
		if want := 0; step == 5 {
			if long.Len() != 1 {
				t.Fatalf("step 5: the long prompt's stream has %d tokens, want 1", long.Len())
			}
		} else if long.Len() != want {
			t.Fatalf("step %d: the long prompt's stream sampled before its prompt was fed", step)
		}
	}
	if rows := cachedRows.Load() - before; rows != 5+20 {
		t.Errorf("five steps fed %d rows, want 25 (one a step for the short stream, the 20-token prompt once)", rows)
	}
}

// TestStepRefusesMixedModels: streams of two models cannot share a step, and NewStream
// refuses what Sample refuses.
func TestStepRefusesMixedModels(t *testing.T) {
	c := tinyArchs()["llama_untied"]
	a, _ := InitLLM(c, 1)
	b, _ := InitLLM(c, 2)
	sa, _ := a.NewStream(SampleRequest{Prompt: []int32{1}}, SampleOptions{MaxTokens: 2})
	sb, _ := b.NewStream(SampleRequest{Prompt: []int32{1}}, SampleOptions{MaxTokens: 2})
	if err := Step(context.Background(), []*Stream{sa, sb}, StepOptions{}); err == nil || !strings.Contains(err.Error(), "more than one model") {
		t.Fatalf("mixed models: %v", err)
	}
	if _, err := a.NewStream(SampleRequest{Prompt: []int32{int32(c.Vocab)}}, SampleOptions{}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("a token out of the vocabulary: %v", err)
	}
	if _, err := a.NewStream(SampleRequest{Prompt: []int32{1}}, SampleOptions{Temperature: -1}); err == nil {
		t.Fatal("a negative temperature: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Step(ctx, []*Stream{sa}, StepOptions{}); err == nil || sa.Len() != 0 {
		t.Fatalf("a cancelled step: %v, %d tokens", err, sa.Len())
	}
}
