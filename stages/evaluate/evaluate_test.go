package evaluate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/workflows"
)

// TestSummarize: task a (easy) succeeds in 1 of 2 samples, task b (easy) in 0 of 2, task c
// (hard) in 2 of 2. avg@2: easy (0.5+0)/2 = 0.25, hard 1, all (0.5+0+1)/3 = 0.5;
// pass@2: easy 1/2, hard 1, all 2/3.
func TestSummarize(t *testing.T) {
	ep := func(id, src string, sample int, reward float64) *rollout.Episode {
		return &rollout.Episode{Task: workflows.Task{ID: id, DataSource: src}, Sample: sample, Reward: reward}
	}
	rows, err := evaluate.Summarize(3, "math", 2, []*rollout.Episode{
		ep("a", "easy", 0, 1), ep("a", "easy", 1, 0), ep("b", "easy", 0, 0), ep("b", "easy", 1, 0), ep("c", "hard", 0, 1), ep("c", "hard", 1, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]float64{"easy": {2, 0.25, 0.5}, "hard": {1, 1, 1}, "all": {3, 0.5, 2.0 / 3}}
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		w := want[r.DataSource]
		if float64(r.Prompts) != w[0] || r.AvgAtK != w[1] || r.PassAtK-w[2] > 1e-12 || w[2]-r.PassAtK > 1e-12 || r.Step != 3 || r.K != 2 {
			t.Errorf("%+v, want prompts %v avg %v pass %v", r, w[0], w[1], w[2])
		}
	}
}

func TestEvaluateCommitsAndRereads(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: stages.LatestStep})
	if err != nil {
		t.Fatal(err)
	}
	var all *evaluate.ResultRow
	for i := range rows {
		if rows[i].DataSource == "all" {
			all = &rows[i]
		}
	}
	if all == nil || all.Prompts != 4 || all.K != 2 || all.AvgAtK < 0 || all.AvgAtK > all.PassAtK {
		t.Fatalf("rows %+v", rows)
	}
	// prompts.parquet: one row per prompt whose success shares average to avg@k and whose
	// share of prompts with a success is pass@k, per source.
	prompts := readPrompts(t, env.Bucket, layout.EvalDir("t", 0))
	if len(prompts) != int(all.Prompts) {
		t.Fatalf("%d per-prompt rows for %d prompts", len(prompts), all.Prompts)
	}
	type agg struct{ n, acc, pass float64 }
	bySource := map[string]*agg{}
	for _, p := range prompts {
		if p.K != all.K || p.Successes < 0 || p.Successes > p.K || p.Step != 0 || p.Split != "eval" || p.TaskID == "" || p.Question == "" {
			t.Fatalf("bad prompt row %+v", p)
		}
		for _, src := range []string{p.DataSource, "all"} {
			a := bySource[src]
			if a == nil {
				a = &agg{}
				bySource[src] = a
			}
			a.n++
			a.acc += float64(p.Successes) / float64(p.K)
			if p.Successes > 0 {
				a.pass++
			}
		}
	}
	for _, r := range rows {
		a := bySource[r.DataSource]
		if a == nil || math.Abs(a.acc/a.n-r.AvgAtK) > 1e-12 || math.Abs(a.pass/a.n-r.PassAtK) > 1e-12 {
			t.Errorf("%s: per-prompt rows give %+v, results say avg %g pass %g", r.DataSource, a, r.AvgAtK, r.PassAtK)
		}
	}

	// The evaluation is committed under the checkpoint's step, and read back even after the
	// checkpoint is gone.
	if err := env.Bucket.Delete(ctx, path.Join(layout.CheckpointDir("t", 0), commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	again, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if err != nil || len(again) != len(rows) || !reflect.DeepEqual(again, rows) {
		t.Fatalf("reread: %+v %v", again, err)
	}
}

func TestTrainSplitEvaluation(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0, Train: true}); err != nil {
		t.Fatal(err)
	}
	m, _, err := commit.Read(ctx, env.Bucket, layout.TrainEvalDir("t", 0))
	if err != nil || m.Params["split"] != "train" {
		t.Fatalf("train-split evaluation: %+v %v", m, err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.EvalDir("t", 0)); ok {
		t.Fatal("a train-split evaluation was written as the held-out one")
	}
	for _, p := range readPrompts(t, env.Bucket, layout.TrainEvalDir("t", 0)) {
		if p.Split != "train" || strings.HasPrefix(p.TaskID, "math-eval") {
			t.Fatalf("train-split prompt row %+v", p)
		}
	}
}

// TestTrainSplitEvaluationOfADataset: a run that trains on a tasks.source file is checked
// in-distribution on that file's prompts (its first tasks.eval_size), not on generated ones it
// never saw.
func TestTrainSplitEvaluationOfADataset(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	var lines []byte
	for i := range 6 {
		lines = fmt.Appendf(lines, `{"id": "d%d", "question": "%d+1", "answer": "%d", "data_source": "mine"}`+"\n", i, i, i+1)
	}
	cfg.Tasks.Source = filepath.Join(t.TempDir(), "mine.jsonl")
	if err := os.WriteFile(cfg.Tasks.Source, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0, Train: true})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].DataSource != "all" && rows[0].DataSource != "mine" {
		t.Fatalf("train-split evaluation of a dataset run measured source %q", rows[0].DataSource)
	}
	prompts := readPrompts(t, env.Bucket, layout.TrainEvalDir("t", 0))
	if len(prompts) != cfg.Tasks.EvalSize {
		t.Fatalf("%d prompts, want tasks.eval_size %d", len(prompts), cfg.Tasks.EvalSize)
	}
	for i, p := range prompts {
		if p.TaskID != fmt.Sprintf("d%d", i) || p.DataSource != "mine" || p.Question != fmt.Sprintf("%d+1", i) {
			t.Fatalf("prompt %d is %+v, want task d%d of %s", i, p, i, cfg.Tasks.Source)
		}
	}
}

// readPrompts reads the per-prompt rows of the evaluation committed in dir, after checking that
// its manifest lists both files.
func readPrompts(t *testing.T, b storage.Bucket, dir string) []evaluate.PromptRow {
	t.Helper()
	ctx := context.Background()
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil || len(m.Files) != 2 || m.Files[0].Name != evaluate.PromptsFile || m.Files[1].Name != evaluate.ResultsFile {
		t.Fatalf("eval manifest %+v, %v", m, err)
	}
	rows, err := evaluate.ReadPrompts(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPairedDelta, worked by hand: k = 2; task a 0 → 1 success, b 1 → 1, c 2 → 2, d only at
// the first step, e only at the second (both left out). Differences in success share: 0.5, 0,
// 0; mean 1/6; sample variance ((1/3)² + 2·(1/6)²)/2 = 1/12; SE = √(1/12)/√3 = 1/6.
func TestPairedDelta(t *testing.T) {
	row := func(step int64, task string, succ int32) evaluate.PromptRow {
		return evaluate.PromptRow{Step: step, Split: "eval", TaskID: task, K: 2, Successes: succ}
	}
	from := []evaluate.PromptRow{row(0, "a", 0), row(0, "b", 1), row(0, "c", 2), row(0, "d", 2)}
	to := []evaluate.PromptRow{row(10, "c", 2), row(10, "a", 1), row(10, "e", 0), row(10, "b", 1)}
	d := evaluate.PairedDelta(from, to)
	if d.FromStep != 0 || d.ToStep != 10 || d.Prompts != 3 || math.Abs(d.Delta-1.0/6) > 1e-15 || math.Abs(d.SE-1.0/6) > 1e-15 {
		t.Fatalf("PairedDelta = %+v, want 3 prompts, delta 1/6, SE 1/6", d)
	}
	if d := evaluate.PairedDelta(from[:1], to[1:2]); d.Prompts != 1 || d.Delta != 0.5 || d.SE != 0 {
		t.Fatalf("one prompt: %+v", d)
	}
	if d := evaluate.PairedDelta(from, nil); d.Prompts != 0 || d.Delta != 0 {
		t.Fatalf("no pairs: %+v", d)
	}
}

// TestPairedDeltaPoolsRepeatedQuestions, worked by hand: k = 2; question "q" is asked by tasks
// a and b (0+1 of 4 samples succeed at step 0, 2+2 of 4 at step 5: share 1/4 → 1, change 3/4),
// question "r" by task c (2 → 0 of 2: change −1). Two independent prompts, not three: mean
// (3/4 − 1)/2 = −1/8; sample variance ((7/8)² + (7/8)²)/1 = 49/32; SE = √(49/32)/√2 = 7/8.
func TestPairedDeltaPoolsRepeatedQuestions(t *testing.T) {
	row := func(step int64, task, q string, succ int32) evaluate.PromptRow {
		return evaluate.PromptRow{Step: step, Split: "eval", TaskID: task, Question: q, K: 2, Successes: succ}
	}
	from := []evaluate.PromptRow{row(0, "a", "q", 0), row(0, "b", "q", 1), row(0, "c", "r", 2)}
	to := []evaluate.PromptRow{row(5, "a", "q", 2), row(5, "b", "q", 2), row(5, "c", "r", 0)}
	d := evaluate.PairedDelta(from, to)
	if d.Prompts != 2 || math.Abs(d.Delta+1.0/8) > 1e-15 || math.Abs(d.SE-7.0/8) > 1e-15 {
		t.Fatalf("PairedDelta = %+v, want 2 prompts, delta -1/8, SE 7/8", d)
	}
}

// TestSummarizeVerifierAcceptRates, worked by hand: source easy has verdicts (correct, approved),
// (correct, rejected), (wrong, rejected); hard has (wrong, approved), (wrong, rejected); search
// episodes without verdicts. easy: correct 1/2, wrong 0/1; hard: correct none (null), wrong 1/2;
// all: correct 1/2, wrong 1/3.
func TestSummarizeVerifierAcceptRates(t *testing.T) {
	v := func(correct, approved bool) workflows.Verdict {
		return workflows.Verdict{CandidateCorrect: correct, Approved: approved}
	}
	eps := []*rollout.Episode{
		{Task: workflows.Task{ID: "a", DataSource: "easy"}, Verdicts: []workflows.Verdict{v(true, true), v(true, false)}},
		{Task: workflows.Task{ID: "a", DataSource: "easy"}, Sample: 1, Verdicts: []workflows.Verdict{v(false, false)}},
		{Task: workflows.Task{ID: "b", DataSource: "hard"}, Verdicts: []workflows.Verdict{v(false, true)}},
		{Task: workflows.Task{ID: "b", DataSource: "hard"}, Sample: 1, Verdicts: []workflows.Verdict{v(false, false)}},
	}
	rows, err := evaluate.Summarize(1, "math", 2, eps)
	if err != nil {
		t.Fatal(err)
	}
	rate := func(x *float64) float64 {
		if x == nil {
			return -1
		}
		return *x
	}
	want := map[string][2]float64{"easy": {0.5, 0}, "hard": {-1, 0.5}, "all": {0.5, 1.0 / 3}}
	for _, r := range rows {
		if got := [2]float64{rate(r.VerifierAcceptCorrect), rate(r.VerifierAcceptWrong)}; got != want[r.DataSource] {
			t.Errorf("%s: accept rates %v, want %v (-1: null)", r.DataSource, got, want[r.DataSource])
		}
	}
	if got := evaluate.VerifierText(rows[0]); got != " verifier accept correct=0.500 wrong=0.000" {
		t.Errorf("VerifierText = %q", got)
	}
	rows, _ = evaluate.Summarize(1, "search", 1, []*rollout.Episode{{Task: workflows.Task{ID: "s", DataSource: "x"}}})
	if rows[0].VerifierAcceptCorrect != nil || rows[0].VerifierAcceptWrong != nil || evaluate.VerifierText(rows[0]) != "" {
		t.Errorf("no verifier: %+v", rows[0])
	}
}

// TestRerunNeverReusesOrRewritesOtherSettings: a committed evaluation is read back only for the
// settings it was made with; with others (here evaluate.k) the rerun is a conflict, not the old
// k's numbers under the new config. A committed evaluation that does not read back is an error,
// and its files are left as they are (a rerun used to evaluate again and overwrite them, tearing
// the intact prompts.parquet away from the manifest).
func TestRerunNeverReusesOrRewritesOtherSettings(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0}); err != nil {
		t.Fatal(err)
	}
	env.Config.Evaluate.K = 4
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: stages.LatestStep})
	if !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "k 2 (this config: 4)") {
		t.Fatalf("rerun with k 4 over an evaluation with k 2: rows %+v, err %v; want a conflict naming k", rows, err)
	}
	// What to do is cmd/drmas's advice, from the error's fields.
	if te := (*stages.TakenError)(nil); !errors.As(err, &te) || te.Stage != "evaluate" || !strings.HasPrefix(te.What, te.Dir+" ") {
		t.Fatalf("conflict %v: want a *stages.TakenError of evaluate naming its folder, got %+v", err, te)
	}

	// Damage results.parquet: a rerun (with the same settings, or others) reports it and leaves
	// prompts.parquet intact.
	dir := layout.EvalDir("t", 0)
	key := path.Join(dir, evaluate.ResultsFile)
	data, err := storage.ReadAll(ctx, env.Bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := storage.PutBytes(ctx, env.Bucket, key, data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{2, 3} {
		env.Config.Evaluate.K = k
		_, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
		if err == nil || (k == 2 && !strings.Contains(err.Error(), evaluate.ResultsFile)) {
			t.Fatalf("k %d: rerun over a damaged committed evaluation: %v; want an error (naming %s at k 2)", k, err, evaluate.ResultsFile)
		}
	}
	readPrompts(t, env.Bucket, dir)
}

// TestEvaluateLatestWithExternalModels: with every model served elsewhere there is no checkpoint
// and no LATEST; evaluating "the latest step" (the CLI default) evaluates step 0, as rollout
// does, instead of failing with "no checkpoint". The server is drmas's own, serving another
// run's warm-up.
func TestEvaluateLatestWithExternalModels(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.ExternalConfig(t)
	env := stagetest.Env(t, cfg)
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: stages.LatestStep})
	if err != nil || len(rows) == 0 || rows[0].Step != 0 {
		t.Fatalf("evaluate LATEST with external models: %+v %v", rows, err)
	}
	if ok, err := commit.IsCommitted(ctx, env.Bucket, layout.EvalDir("ext", 0)); err != nil || !ok {
		t.Fatalf("evaluation of step 0 not committed: %v", err)
	}
}

// TestHeldOutEvaluationOfAFile: with evaluate.source a tasks file, the held-out evaluation is
// the file's first tasks.eval_size tasks; rerunning it after the file changed is a conflict
// naming the prompts, not the old numbers; a missing file is reported up front by CheckTasks.
func TestHeldOutEvaluationOfAFile(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	write := func(first int) {
		var lines []byte
		for i := range 10 {
			lines = fmt.Appendf(lines, `{"id": "h%d", "question": "%d+2", "answer": "%d", "data_source": "heldout"}`+"\n", i, i+first, i+first+2)
		}
		if err := os.WriteFile(cfg.Evaluate.Source, lines, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Evaluate.Source = filepath.Join(t.TempDir(), "heldout.jsonl")
	write(0)
	if err := stages.CheckTasks(cfg); err != nil {
		t.Fatal(err)
	}
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || (rows[0].DataSource != "all" && rows[0].DataSource != "heldout") {
		t.Fatalf("held-out evaluation of a file measured %+v", rows)
	}
	prompts := readPrompts(t, env.Bucket, layout.EvalDir("t", 0))
	if want := min(cfg.Tasks.EvalSize, 10); len(prompts) != want {
		t.Fatalf("%d prompts, want %d", len(prompts), want)
	}
	for i, p := range prompts {
		if p.TaskID != fmt.Sprintf("h%d", i) || p.DataSource != "heldout" || p.Question != fmt.Sprintf("%d+2", i) {
			t.Fatalf("prompt %d is %+v, want task h%d of %s", i, p, i, cfg.Evaluate.Source)
		}
	}
	write(100) // same ids, other questions
	_, err = evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "prompts_sha256") {
		t.Fatalf("rerun with other prompts: %v, want a conflict naming prompts_sha256", err)
	}
	cfg.Evaluate.Source = filepath.Join(t.TempDir(), "missing.jsonl")
	if err := stages.CheckTasks(cfg); err == nil || !strings.Contains(err.Error(), "evaluate.source: ") {
		t.Fatalf("CheckTasks with a missing evaluate.source: %v", err)
	}
}

// TestTrainSplitIgnoresEvaluateSource: a training-split evaluation does not use the held-out
// prompts, so an evaluate.source file that is missing here (or malformed) does not stop it.
func TestTrainSplitIgnoresEvaluateSource(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Evaluate.Source = filepath.Join(t.TempDir(), "missing.jsonl")
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0, Train: true})
	if err != nil || len(rows) == 0 {
		t.Fatalf("train-split evaluation with a missing evaluate.source: %v", err)
	}
	if _, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0}); err == nil || !strings.Contains(err.Error(), "evaluate.source: ") {
		t.Fatalf("held-out evaluation with a missing evaluate.source: %v", err)
	}
}

// TestReadBackOfAManifestWithoutAParam: an evaluation whose manifest does not record one of
// the params this config's records (here prompts_sha256, which says which prompts were
// evaluated) is not taken for this config's: it is a conflict naming the param.
func TestReadBackOfAManifestWithoutAParam(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0}); err != nil {
		t.Fatal(err)
	}
	dir := layout.EvalDir("t", 0)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Params["prompts_sha256"]; !ok {
		t.Fatal("no prompts_sha256 to remove: the test shows nothing")
	}
	delete(m.Params, "prompts_sha256")
	putManifest(t, env.Bucket, dir, m)
	rows, err := evaluate.Run(ctx, env, evaluate.Options{Step: 0})
	if !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "no prompts_sha256 (this config: ") {
		t.Fatalf("read-back of a manifest without prompts_sha256: rows %+v, err %v; want a conflict naming it", rows, err)
	}
}

// TestSummarizeRejectsSourceAll: a task of data source "all" made two "all" rows (its own
// and the aggregate), and readers that take the first "all" row reported the subset.
func TestSummarizeRejectsSourceAll(t *testing.T) {
	eps := []*rollout.Episode{
		{Task: workflows.Task{ID: "a", DataSource: "all"}, Reward: 1},
		{Task: workflows.Task{ID: "b", DataSource: "x"}, Reward: 0},
	}
	rows, err := evaluate.Summarize(0, "math", 1, eps)
	if err == nil || !strings.Contains(err.Error(), `task "a" has data source "all"`) {
		t.Fatalf("rows %+v, err %v: want an error naming task a", rows, err)
	}
}

// putManifest overwrites dir's manifest with m, as a writer of another version would have.
func putManifest(t *testing.T, b storage.Bucket, dir string, m *commit.Manifest) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.PutBytes(context.Background(), b, path.Join(dir, commit.ManifestName), data); err != nil {
		t.Fatal(err)
	}
}
