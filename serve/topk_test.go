package serve_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestTopKThroughServe: rollout.top_k travels to drmas serve (the request's top_k) and is
// applied there as in process. At top_k 1 a temperature-1 rollout draws the greedy tokens with
// the greedy rollout's log-probs (both are log softmax(z) of the argmax), in process and
// through HTTP; a top_k below -1 is refused with a message naming top_k.
func TestTopKThroughServe(t *testing.T) {
	ctx := context.Background()
	run := func(cfg *configs.Config, http bool) [][]int32 {
		env := warm(t, cfg)
		if http {
			_, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1})
			env.Config = viaHTTP(cfg, url, configs.OpenAI{Concurrency: 8})
		}
		if _, err := rollout.Run(ctx, env, rollout.Options{Step: stages.LatestStep}); err != nil {
			t.Fatal(err)
		}
		_, rows := readRollout(t, env)
		var out [][]int32
		for _, r := range rows {
			out = append(out, r.ResponseIDs)
			lp := make([]int32, len(r.ResponseLogprobs))
			for i, v := range r.ResponseLogprobs {
				lp[i] = int32(v * 1e6)
			}
			out = append(out, lp)
		}
		return out
	}
	greedy := stagetest.Config(t, "math")
	greedy.Rollout.Temperature = 0
	topK := stagetest.Config(t, "math")
	topK.Rollout.Temperature, topK.Rollout.TopK = 1, 1
	want := run(greedy, false)
	if got := run(topK, false); !reflect.DeepEqual(got, want) {
		t.Fatalf("top_k 1 in process differs from greedy")
	}
	if got := run(topK, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("top_k 1 through serve differs from greedy")
	}
	free := stagetest.Config(t, "math")
	free.Rollout.Temperature = 1
	if got := run(free, false); reflect.DeepEqual(got, want) {
		t.Fatalf("temperature 1 without top_k drew the greedy tokens: the test cannot tell top_k apart")
	}

	env := warm(t, greedy)
	_, url := start(t, serve.Options{Bucket: env.Bucket, Run: greedy.Run, Poll: -1})
	code, body := post(t, url+"/v1/completions", map[string]any{"model": "m1", "prompt": []int{1, 2, 3}, "max_tokens": 2, "top_k": -2})
	if msg := toString(body); code != 400 || !strings.Contains(msg, "top_k") {
		t.Fatalf("top_k -2: status %d %s, want 400 naming top_k", code, msg)
	}
}
