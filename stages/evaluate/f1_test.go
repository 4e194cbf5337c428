package evaluate_test

import (
	"bytes"
	"context"
	"math"
	"path"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/workflows"
)

// scriptedSearch plays the search workflow's agents by script: the router says "enough" at
// once and the answerer gives answers[task][sample], the request's Seed naming both
// (task<<8 | sample, as the test's PlayOptions.Seed makes it).
type scriptedSearch struct{ answers [][]string }

func (scriptedSearch) Model() string  { return "scripted" }
func (scriptedSearch) Version() int64 { return 0 }
func (b scriptedSearch) Generate(_ context.Context, reqs []actors.Request, _ actors.Sampling) ([]actors.Response, error) {
	out := make([]actors.Response, len(reqs))
	for i, r := range reqs {
		text := "enough"
		if r.Agent == workflows.AgentAnswerer {
			text = "a " + b.answers[r.Seed>>8][r.Seed&0xff]
		}
		out[i] = actors.Response{Tokens: actors.TargetIDs(text), FinishReason: "stop"}
	}
	return out, nil
}

// TestSearchEvaluationF1 plays the search workflow (with a step-cost reward design, whose
// wrapper must not hide the F1) on three tasks × 2 scripted answers and checks the F1 columns
// against values worked by hand from SQuAD's F1 = 2·common / (|answer| + |golden|) (tokens
// after normalization), the best over the golden answers:
//
//	s1 (nq), golden "Barack Obama" | "Obama":
//	  "obama"                   matches "Obama"                                    F1 1   (EM)
//	  "president barack obama"  vs "barack obama": 2·2/(3+2) = 0.8; vs "obama": 2·1/(3+1) = 0.5 → 0.8
//	  prompt mean 0.9
//	s2 (nq), golden "the Eiffel Tower" (normalized "eiffel tower"):
//	  "tower"                   2·1/(1+2) = 2/3
//	  "big ben"                 0
//	  prompt mean 1/3
//	s3 (hotpotqa), golden "New York City":
//	  "york new york"           common new, york (the second york is unmatched): 2·2/(3+3) = 2/3
//	  "new york city"           1   (EM)
//	  prompt mean 5/6
//
// Per source: nq (0.9 + 1/3)/2 = 37/60, hotpotqa 5/6, all (0.9 + 1/3 + 5/6)/3 = 31/45; avg@2
// (exact match) nq (1/2 + 0)/2 = 1/4, hotpotqa 1/2, all 1/3.
func TestSearchEvaluationF1(t *testing.T) {
	o := workflows.DefaultOptions()
	o.StepCost = 0.01
	wf, err := workflows.New("search", o)
	if err != nil {
		t.Fatal(err)
	}
	tasks := []workflows.Task{
		{ID: "s1", Question: "who was president", Answer: `["Barack Obama", "Obama"]`, DataSource: "nq"},
		{ID: "s2", Question: "what is in paris", Answer: `["the Eiffel Tower"]`, DataSource: "nq"},
		{ID: "s3", Question: "which city is big", Answer: "New York City", DataSource: "hotpotqa"},
	}
	be := scriptedSearch{answers: [][]string{
		{"obama", "president barack obama"},
		{"tower", "big ben"},
		{"york new york", "new york city"},
	}}
	index := map[string]uint64{"s1": 0, "s2": 1, "s3": 2}
	eps, err := rollout.Play(context.Background(), wf, tasks, map[string]actors.Backend{
		workflows.AgentRouter: be, workflows.AgentSearcher: be, workflows.AgentAnswerer: be,
	}, rollout.PlayOptions{Samples: 2, Seed: func(t workflows.Task, sample, _ int) uint64 { return index[t.ID]<<8 | uint64(sample) }})
	if err != nil {
		t.Fatal(err)
	}
	wantEp := []float64{1, 0.8, 2.0 / 3, 0, 2.0 / 3, 1}
	for i, ep := range eps {
		if ep.F1 == nil || math.Abs(*ep.F1-wantEp[i]) > 1e-12 {
			t.Fatalf("episode %d (task %s sample %d): F1 %v, want %v", i, ep.Task.ID, ep.Sample, ep.F1, wantEp[i])
		}
		if ep.Scores == nil {
			t.Fatalf("episode %d: no turn scores: the step-cost design did not wrap the episode", i)
		}
	}

	prompts := evaluate.PerPrompt(5, "eval", 2, eps)
	wantPrompt := map[string][2]float64{"s1": {1, 0.9}, "s2": {0, 1.0 / 3}, "s3": {1, 5.0 / 6}}
	if len(prompts) != 3 {
		t.Fatalf("per-prompt rows %+v", prompts)
	}
	for _, p := range prompts {
		w := wantPrompt[p.TaskID]
		if float64(p.Successes) != w[0] || p.F1Mean == nil || math.Abs(*p.F1Mean-w[1]) > 1e-12 {
			t.Errorf("prompt %s: successes %d, F1 %v; want %v and %v", p.TaskID, p.Successes, p.F1Mean, w[0], w[1])
		}
	}
	rows, err := evaluate.Summarize(5, "search", 2, eps)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"hotpotqa": {0.5, 5.0 / 6}, "nq": {0.25, 37.0 / 60}, "all": {1.0 / 3, 31.0 / 45}}
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		w, ok := want[r.DataSource]
		if !ok || math.Abs(r.AvgAtK-w[0]) > 1e-12 || r.F1Mean == nil || math.Abs(*r.F1Mean-w[1]) > 1e-12 {
			t.Errorf("%s: avg@2 %v, F1 %v; want %v and %v", r.DataSource, r.AvgAtK, r.F1Mean, w[0], w[1])
		}
	}

	// The columns survive the files: encoded and read back as the stage stores them.
	data, err := shards.EncodeTable(rows)
	if err != nil {
		t.Fatal(err)
	}
	back, err := shards.ReadTable[evaluate.ResultRow](bytes.NewReader(data), int64(len(data)), "results.parquet")
	if err != nil || len(back) != len(rows) {
		t.Fatalf("read back: %v", err)
	}
	for i := range back {
		if back[i].F1Mean == nil || *back[i].F1Mean != *rows[i].F1Mean {
			t.Errorf("row %d read back with F1 %v, wrote %v", i, back[i].F1Mean, *rows[i].F1Mean)
		}
	}
}

// TestEvaluationF1Columns runs the evaluate stage: the math workflow stores no F1 (null in both
// files), the search workflow stores one per prompt and per source, each source's the mean of
// its prompts', and reads it back.
func TestEvaluationF1Columns(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"math", "search"} {
		env := stagetest.Env(t, stagetest.Config(t, name))
		if _, err := warmup.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: stages.LatestStep})
		if err != nil {
			t.Fatal(err)
		}
		prompts := readPrompts(t, env.Bucket, layout.EvalDir("t", 0))
		if name == "math" {
			for _, r := range rows {
				if r.F1Mean != nil {
					t.Errorf("math %s: F1 %v, want none", r.DataSource, *r.F1Mean)
				}
			}
			for _, p := range prompts {
				if p.F1Mean != nil {
					t.Errorf("math prompt %s: F1 %v, want none", p.TaskID, *p.F1Mean)
				}
			}
			continue
		}
		sum, n := map[string]float64{}, map[string]int{}
		for _, p := range prompts {
			if p.F1Mean == nil || *p.F1Mean < 0 || *p.F1Mean > 1 {
				t.Fatalf("search prompt %s: F1 %v, want one in [0, 1]", p.TaskID, p.F1Mean)
			}
			// An exact match has F1 1: a prompt's F1 is at least its success share.
			if *p.F1Mean < float64(p.Successes)/float64(p.K)-1e-12 {
				t.Errorf("search prompt %s: F1 %v below its success share %d/%d", p.TaskID, *p.F1Mean, p.Successes, p.K)
			}
			for _, src := range []string{p.DataSource, workflows.AllSources} {
				sum[src] += *p.F1Mean
				n[src]++
			}
		}
		for _, r := range rows {
			if r.F1Mean == nil || math.Abs(*r.F1Mean-sum[r.DataSource]/float64(n[r.DataSource])) > 1e-12 {
				t.Errorf("search %s: F1 %v, its prompts' mean %v", r.DataSource, r.F1Mean, sum[r.DataSource]/float64(n[r.DataSource]))
			}
		}
		back, _, err := evaluate.Read(ctx, env.Bucket, layout.EvalDir("t", 0))
		if err != nil || len(back) != len(rows) {
			t.Fatalf("read back: %v", err)
		}
		for i := range back {
			if back[i].F1Mean == nil || *back[i].F1Mean != *rows[i].F1Mean {
				t.Errorf("%s read back with F1 %v", back[i].DataSource, back[i].F1Mean)
			}
		}
	}
}

// TestReadEvaluationWrittenWithoutF1: an evaluation committed before the f1_mean column
// existed (its two files in the earlier schema) is read back by a rerun, Read and ReadPrompts,
// its rows unchanged and without an F1, rather than refused or evaluated again.
func TestReadEvaluationWrittenWithoutF1(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "search"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if err != nil {
		t.Fatal(err)
	}
	dir := layout.EvalDir("t", 0)
	prompts := readPrompts(t, env.Bucket, dir)
	oldRows, oldPrompts := shardtest.ResultsBeforeF1(rows), shardtest.PromptsBeforeF1(prompts)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		var data []byte
		switch f.Name {
		case evaluate.ResultsFile:
			data, err = shards.EncodeTable(oldRows)
		case evaluate.PromptsFile:
			data, err = shards.EncodeTable(oldPrompts)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := storage.PutBytes(ctx, env.Bucket, path.Join(dir, f.Name), data); err != nil {
			t.Fatal(err)
		}
		m.Files[i].Bytes, m.Files[i].SHA256 = int64(len(data)), commit.Digest(data)
	}
	putManifest(t, env.Bucket, dir, m)

	again, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if err != nil || len(again) != len(rows) {
		t.Fatalf("rerun over an evaluation without f1_mean: %d rows, %v", len(again), err)
	}
	read, _, err := evaluate.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range append(again, read...) {
		w := rows[i%len(rows)]
		w.F1Mean = nil
		if r != w {
			t.Errorf("row %d reads %+v, want %+v", i, r, w)
		}
	}
	back := readPrompts(t, env.Bucket, dir)
	for i, p := range back {
		w := prompts[i]
		w.F1Mean = nil
		if p != w {
			t.Errorf("prompt %d reads %+v, want %+v", i, p, w)
		}
	}
}

func TestF1Text(t *testing.T) {
	f1 := 0.375
	if got := evaluate.F1Text(evaluate.ResultRow{F1Mean: &f1}); got != " f1=0.375" {
		t.Errorf("F1Text of 0.375: %q", got)
	}
	if got := evaluate.F1Text(evaluate.ResultRow{}); got != "" {
		t.Errorf("F1Text without F1: %q, want nothing", got)
	}
}
