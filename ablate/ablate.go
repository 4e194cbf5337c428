// Package ablate compares advantage estimators on a run.
//
// Replay (the controlled comparison): for each committed rollout iteration N of run SRC and each
// estimator E, the rollout folder (objects and manifest, byte for byte) and the checkpoint that
// generated it (its policy_version, objects and manifest) are copied into run SRC-ablate-E, then
// normalize recomputes E on those same rollouts and the learner trains from that same
// checkpoint. The only difference between the estimators' outputs is the estimator.
//
// Layout of a replay run: iterations are independent what-ifs, so each keeps its checkpoints
// inside its own iteration folder — runs/SRC-ablate-E/iter=N/checkpoints/step=V (the copied
// start) and step=V+1 (what E's update produced) — instead of the run-wide checkpoints/ folder,
// and the evaluations of those steps in iter=N/eval/ (the stages see the usual layout through a
// key-rewriting view of the bucket). The rollout,
// advantage, diagnostics and learn folders have the usual layout, so `drmas analyze` works on a
// replay run as on any other. The copied rollout manifest still says run SRC.
//
// On-policy: a full pipeline.Run per estimator × seed into runs SRC-E-sSEED (each from its own
// warm-up, which depends only on the seed).
//
// Both modes write runs/SRC/ablations/<mode>/summary.parquet (+ _MANIFEST.json): one SummaryRow
// per (estimator, seed, iteration, model, agent). The same inputs and config give byte-identical
// outputs. Committed work is not redone (an interrupted ablation resumes), so an output run
// whose updates were learned under another config is an error, not summarized as this one's.
package ablate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/storage"
)

// Modes.
const (
	Replay   = "replay"
	OnPolicy = "onpolicy"
)

// DefaultEstimators are compared when none are named.
var DefaultEstimators = []string{"drmas", "grpo", "grpo_step"}

// Range is an inclusive range of iterations; the zero Range (Set false) means all.
type Range struct {
	First, Last int
	Set         bool
}

// ParseRange parses "a..b", "a.." (from a), "..b" (up to b), "a" (one), or "" (all).
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Range{}, nil
	}
	lo, hi, dots := strings.Cut(s, "..")
	if !dots {
		hi = lo
	}
	r := Range{First: 0, Last: math.MaxInt32, Set: true}
	var err error
	if lo != "" {
		if r.First, err = strconv.Atoi(lo); err != nil || r.First < 0 {
			return Range{}, fmt.Errorf("iterations %q: want a..b with 0 ≤ a ≤ b", s)
		}
	}
	if hi != "" {
		if r.Last, err = strconv.Atoi(hi); err != nil || r.Last < r.First {
			return Range{}, fmt.Errorf("iterations %q: want a..b with 0 ≤ a ≤ b", s)
		}
	}
	return r, nil
}

// Contains reports whether it is in r.
func (r Range) Contains(it int) bool { return !r.Set || (it >= r.First && it <= r.Last) }

// ParseSeeds parses "1,2,3". A seed given twice is an error.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, uniqueSeeds(out)
}

// uniqueSeeds rejects a seed given twice: its run would be summarized twice, as two seeds.
func uniqueSeeds(seeds []uint64) error {
	seen := map[uint64]bool{}
	for _, v := range seeds {
		if seen[v] {
			return fmt.Errorf("seed %d given twice", v)
		}
		seen[v] = true
	}
	return nil
}

// Options configure Run. The source run is env.Config.Run; the config must be the one the source
// run was trained with.
type Options struct {
	Mode       string   // Replay (default) or OnPolicy
	Estimators []string // default DefaultEstimators
	// Iterations: replay, which committed rollout iterations to replay (default all);
	// on-policy, iterations Last+1 are run and First..Last summarized (default the config's
	// iterations).
	Iterations Range
	Seeds      []uint64 // on-policy seeds (default the config's seed); replay uses the config's
	// Eval evaluates every replayed checkpoint (replay; on-policy runs evaluate per EvalEvery).
	Eval bool
	// EvalEvery is pipeline.Options.EvalEvery of on-policy runs (0: the config's evaluate.every).
	EvalEvery int
}

// Result is what Run did.
type Result struct {
	Mode    string
	Source  string
	Runs    []string     // output runs, in order
	Rows    []SummaryRow // the summary
	Skipped []string     // iterations that could not be replayed, and why
	// SummaryDir is the committed folder of the summary; SummarySHA256 its manifest's digest.
	SummaryDir, SummarySHA256 string
}

// RunName is the output run of an estimator (and, on-policy, a seed).
func RunName(mode, src, est string, seed uint64) string {
	if mode == OnPolicy {
		return fmt.Sprintf("%s-%s-s%d", src, est, seed)
	}
	return src + "-ablate-" + est
}

// outputRun is RunName of cfg's ablation: a replay under learn objective options off their
// defaults (docs/objectives.md) gets their tag too, so the same rows learned under other
// options are runs of their own.
func outputRun(cfg *configs.Config, mode, src, est string, seed uint64) string {
	run := RunName(mode, src, est, seed)
	if tag := cfg.Learn.ObjectiveTag(); mode == Replay && tag != "" {
		run += "-" + tag
	}
	return run
}

// Run runs the ablation and commits its summary. Cancelling ctx stops it with an error that
// says it was interrupted (naming the stage it stopped in, if one was running) and matches
// context.Canceled.
func Run(ctx context.Context, env *stages.Env, o Options) (_ *Result, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = stages.Fail(ctx, "ablate", err)
		}
	}()
	cfg := env.Config
	if o.Mode == "" {
		o.Mode = Replay
	}
	if o.Mode != Replay && o.Mode != OnPolicy {
		return nil, fmt.Errorf("ablate: unknown mode %q (want replay or onpolicy)", o.Mode)
	}
	if len(o.Estimators) == 0 {
		o.Estimators = DefaultEstimators
	}
	specs, err := normalize.ParseSpecs(o.Estimators, cfg.Normalize.Eps)
	if err != nil {
		return nil, fmt.Errorf("ablate: %w", err)
	}
	if err := layout.ValidateRunName(cfg.Run); err != nil {
		return nil, fmt.Errorf("ablate: source run: %w", err)
	}
	if o.Eval && o.Mode == Replay && cfg.Tasks.EvalSize == 0 {
		return nil, fmt.Errorf("ablate: evaluation asked for, but tasks.eval_size is 0: set it to the number of held-out prompts to evaluate on")
	}
	res := &Result{Mode: o.Mode, Source: cfg.Run}
	seeds := []uint64{cfg.Seed}
	if o.Mode == OnPolicy && len(o.Seeds) > 0 {
		if err := uniqueSeeds(o.Seeds); err != nil {
			return nil, fmt.Errorf("ablate: %w", err)
		}
		seeds = o.Seeds
	}
	var ests []string
	for _, s := range specs {
		ests = append(ests, s.Name())
		for _, seed := range seeds {
			if err := layout.ValidateRunName(outputRun(cfg, o.Mode, cfg.Run, s.Name(), seed)); err != nil {
				return nil, fmt.Errorf("ablate: output run: %w", err)
			}
		}
	}
	var inputs []commit.Input
	switch o.Mode {
	case Replay:
		inputs, err = replay(ctx, env, o, ests, res)
	case OnPolicy:
		inputs, err = onPolicy(ctx, env, o, ests, seeds, res)
	}
	if err != nil {
		return res, err
	}
	sortRows(res.Rows)
	// The same ablation given in another order (--estimators grpo,drmas, --seeds 2,1) is the
	// same summary: its manifest lists them sorted, as the summary's rows are.
	params := map[string]string{"mode": o.Mode, "estimators": strings.Join(slices.Sorted(slices.Values(ests)), ","),
		"runs": strings.Join(slices.Sorted(slices.Values(res.Runs)), ",")}
	if o.Mode == OnPolicy {
		params["seeds"] = joinSeeds(slices.Sorted(slices.Values(seeds)))
	}
	if o.Iterations.Set {
		params["iterations"] = fmt.Sprintf("%d..%d", o.Iterations.First, o.Iterations.Last)
	}
	res.SummaryDir = layout.AblationDir(cfg.Run, o.Mode)
	res.SummarySHA256, err = writeSummary(ctx, env.Bucket, cfg.Run, res.SummaryDir, res.Rows, inputs, params)
	return res, err
}

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(s, ",")
}

// withRun returns a copy of cfg for an output run. Slices and maps are not shared mutably: only
// fields reassigned here differ.
func withRun(cfg *configs.Config, run, est string, seed uint64) *configs.Config {
	c := *cfg
	c.Run = run
	c.Seed = seed
	c.Normalize.Estimators = []string{est}
	c.Learn.Estimator = est
	return &c
}

// StoredIterations lists the iterations of run whose rollout is committed.
func StoredIterations(ctx context.Context, b storage.Bucket, run string) ([]int, error) {
	prefix := layout.RunDir(run) + "/iter="
	var out []int
	err := b.Iter(ctx, prefix, func(key string) error {
		rest := strings.TrimPrefix(key, prefix)
		num, tail, ok := strings.Cut(rest, "/")
		if !ok || tail != "rollout/"+commit.ManifestName {
			return nil
		}
		if n, err := strconv.Atoi(num); err == nil {
			out = append(out, n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list iterations of %s: %w", run, err)
	}
	sort.Ints(out)
	return out, nil
}

func replay(ctx context.Context, env *stages.Env, o Options, ests []string, res *Result) ([]commit.Input, error) {
	cfg := env.Config
	b := env.Bucket
	src := cfg.Run
	all, err := StoredIterations(ctx, b, src)
	if err != nil {
		return nil, err
	}
	var iters []int
	for _, it := range all {
		if o.Iterations.Contains(it) {
			iters = append(iters, it)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("ablate: run %s has no committed rollout in store %s: check --run and --store (`drmas run` writes a run; replay needs its rollouts)", src, cfg.Store)
	}
	if len(iters) == 0 {
		return nil, fmt.Errorf("ablate: run %s has no committed rollout in the requested iterations (it has %v)", src, all)
	}
	var inputs []commit.Input
	skipped := map[int]bool{}
	for _, est := range ests {
		run := outputRun(cfg, Replay, src, est, cfg.Seed)
		res.Runs = append(res.Runs, run)
		acfg := withRun(cfg, run, est, cfg.Seed)
		for _, it := range iters {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if skipped[it] {
				continue
			}
			rm, err := CopyFolder(ctx, b, layout.RolloutDir(src, it), b, layout.RolloutDir(run, it))
			if err != nil {
				return nil, fmt.Errorf("ablate: copy rollout: %w", err)
			}
			version, err := strconv.ParseInt(rm.Params["policy_version"], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("ablate: %s: rollout manifest has no policy_version", layout.RolloutDir(src, it))
			}
			view := IterCheckpoints(b, run, it)
			if _, err := CopyFolder(ctx, b, layout.CheckpointDir(src, version), view, layout.CheckpointDir(run, version)); err != nil {
				if errors.Is(err, commit.ErrNotCommitted) {
					skipped[it] = true
					why := fmt.Sprintf("iteration %d: checkpoint step %d of run %s that generated it is gone (learn.keep_checkpoints)", it, version, src)
					if rm.Params["imported"] == "true" {
						// Never there, rather than retired: say how to provide it.
						why = fmt.Sprintf("iteration %d: imported rollout of policy_version %d, and run %s has no checkpoint step %d to start from (publish it first: `drmas run-stage warmup` publishes step 0)", it, version, src, version)
					}
					res.Skipped = append(res.Skipped, why)
					env.Logf("ablate: skip %s", why)
					continue
				}
				return nil, fmt.Errorf("ablate: copy checkpoint: %w", err)
			}
			// learn.kl_coef > 0 loads the reference policy (step 0) too: give the view a copy.
			if acfg.Learn.KLCoef > 0 && version != 0 {
				if _, err := CopyFolder(ctx, b, layout.CheckpointDir(src, 0), view, layout.CheckpointDir(run, 0)); err != nil {
					return nil, fmt.Errorf("ablate: copy the reference checkpoint (step 0, learn.kl_coef > 0): %w", err)
				}
			}
			aenv := &stages.Env{Bucket: view, Config: acfg, Log: env.Log, Progress: env.Progress}
			if _, err := normalize.Run(ctx, aenv, normalize.Options{Iteration: it, Estimators: []string{est}}); err != nil {
				return nil, fmt.Errorf("ablate %s: %w", est, err)
			}
			lr, err := learn.Run(ctx, aenv, learn.Options{Iteration: it, Estimator: est})
			if err != nil {
				return nil, fmt.Errorf("ablate %s: %w", est, err)
			}
			if o.Eval {
				if _, err := evaluate.Run(ctx, aenv, evaluate.Options{Step: lr.Step}); err != nil {
					return nil, fmt.Errorf("ablate %s: %w", est, err)
				}
			}
			rows, in, err := summarize(ctx, aenv, Replay, est, cfg.Seed, it)
			if err != nil {
				return nil, err
			}
			res.Rows = append(res.Rows, rows...)
			inputs = append(inputs, in...)
		}
	}
	if len(res.Rows) == 0 {
		return nil, fmt.Errorf("ablate: nothing to replay in run %s: %s", src, strings.Join(res.Skipped, "; "))
	}
	return inputs, nil
}

func onPolicy(ctx context.Context, env *stages.Env, o Options, ests []string, seeds []uint64, res *Result) ([]commit.Input, error) {
	cfg := env.Config
	n := cfg.Iterations
	if o.Iterations.Set {
		if o.Iterations.Last == math.MaxInt32 {
			return nil, fmt.Errorf("ablate: on-policy needs an upper bound on the iterations (a..b)")
		}
		n = o.Iterations.Last + 1
	}
	if n < 1 {
		return nil, fmt.Errorf("ablate: on-policy needs at least one iteration")
	}
	var inputs []commit.Input
	// The warm-up does not depend on the estimator (warmup.Digest covers seed, workflow, warm-up
	// and model settings only), so runs with the same seed share it: the first run of a seed
	// trains it, the others start from a byte-for-byte copy of its step 0 and its evaluation.
	warmedUp := map[uint64]string{}
	// In a canonical order: the run that trains a seed's warm-up is named in the step-0
	// manifest every other run of the seed copies, so the order given must not choose it.
	ests, seeds = slices.Sorted(slices.Values(ests)), slices.Sorted(slices.Values(seeds))
	for _, est := range ests {
		for _, seed := range seeds {
			run := RunName(OnPolicy, cfg.Run, est, seed)
			res.Runs = append(res.Runs, run)
			penv := &stages.Env{Bucket: env.Bucket, Config: withRun(cfg, run, est, seed), Log: env.Log, Progress: env.Progress}
			if from, ok := warmedUp[seed]; ok {
				if err := shareWarmup(ctx, env.Bucket, from, run); err != nil {
					return nil, fmt.Errorf("ablate %s: %w", run, err)
				}
			}
			env.Logf("ablate: on-policy run %s (%d iterations)", run, n)
			if _, err := pipeline.Run(ctx, penv, pipeline.Options{Iterations: n, EvalEvery: o.EvalEvery}); err != nil {
				return nil, fmt.Errorf("ablate %s: %w", run, err)
			}
			if _, ok := warmedUp[seed]; !ok {
				warmedUp[seed] = run
			}
			for it := 0; it < n; it++ {
				if !o.Iterations.Contains(it) {
					continue
				}
				rows, in, err := summarize(ctx, penv, OnPolicy, est, seed, it)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, rows...)
				inputs = append(inputs, in...)
			}
		}
	}
	return inputs, nil
}

// shareWarmup copies run from's warm-up checkpoint (step 0) and its evaluation into run to,
// unless to already has a step 0, and points to's LATEST at it.
func shareWarmup(ctx context.Context, b storage.Bucket, from, to string) error {
	if ok, err := commit.IsCommitted(ctx, b, layout.CheckpointDir(to, 0)); err != nil || ok {
		return err
	}
	if _, err := CopyFolder(ctx, b, layout.CheckpointDir(from, 0), b, layout.CheckpointDir(to, 0)); err != nil {
		return fmt.Errorf("share the warm-up of %s: %w", from, err)
	}
	if _, err := CopyFolder(ctx, b, layout.EvalDir(from, 0), b, layout.EvalDir(to, 0)); err != nil && !errors.Is(err, commit.ErrNotCommitted) {
		return fmt.Errorf("share the warm-up evaluation of %s: %w", from, err)
	}
	return checkpoints.SetLatest(ctx, b, to, 0)
}

// summarize builds the summary rows of one iteration of an output run from its committed
// outputs: learn metrics, the rollout's per-agent scores (key columns only) and the evaluation
// of the published step, if any.
func summarize(ctx context.Context, env *stages.Env, mode, est string, seed uint64, it int) ([]SummaryRow, []commit.Input, error) {
	cfg := env.Config
	b := env.Bucket
	run := cfg.Run
	ldir := layout.LearnDir(run, it)
	lm, lsha, err := commit.Read(ctx, b, ldir)
	if err != nil {
		return nil, nil, fmt.Errorf("ablate: %w", err)
	}
	// Committed work is not redone, so an output run left by an ablation under another config
	// (learn settings, seed, agents, models, rollout temperature) would be summarized as this
	// config's.
	if !learn.SameConfig(cfg, est, lm.ConfigDigest) {
		return nil, nil, fmt.Errorf("ablate: %s was learned under another config than this one (learn settings, seed, agents, models or rollout temperature differ): rerun with that config, or delete runs/%s to redo the %s ablation with this one",
			ldir, run, mode)
	}
	data, err := commit.ReadFile(ctx, b, ldir, lm.Files[0])
	if err != nil {
		return nil, nil, err
	}
	metrics, err := shards.ReadTable[learn.MetricsRow](bytes.NewReader(data), int64(len(data)), ldir)
	if err != nil {
		return nil, nil, err
	}
	inputs := []commit.Input{{Dir: ldir, ManifestSHA256: lsha}}

	// Per-agent rollout scores.
	rdir := layout.RolloutDir(run, it)
	rm, _, err := commit.Read(ctx, b, rdir)
	if err != nil {
		return nil, nil, fmt.Errorf("ablate: %w", err)
	}
	type acc struct {
		n   int64
		sum float64
	}
	scores := map[string]*acc{}
	for _, f := range rm.Files {
		key := path.Join(rdir, f.Name)
		pf, err := shards.OpenColumns(ctx, b, key, f.Bytes, shards.KeyColumns)
		if err != nil {
			return nil, nil, err
		}
		keys, err := shards.ReadKeys(ctx, pf, key)
		if err != nil {
			return nil, nil, err
		}
		for i, code := range keys.Agent {
			for _, name := range []string{keys.Agents[code], "*" + cfg.Agents[keys.Agents[code]].Model} {
				a := scores[name]
				if a == nil {
					a = &acc{}
					scores[name] = a
				}
				a.n++
				a.sum += keys.Score[i]
			}
		}
	}

	// Evaluation of the published step.
	var eval *evaluate.ResultRow
	if len(metrics) > 0 {
		edir := layout.EvalDir(run, metrics[0].Step)
		ev, esha, err := evaluate.Read(ctx, b, edir)
		switch {
		case err == nil:
			for i := range ev {
				if ev[i].DataSource == "all" {
					eval = &ev[i]
				}
			}
			inputs = append(inputs, commit.Input{Dir: edir, ManifestSHA256: esha})
		case !errors.Is(err, commit.ErrNotCommitted):
			return nil, nil, err
		}
	}

	var out []SummaryRow
	for _, m := range metrics {
		r := SummaryRow{
			Mode: mode, Estimator: est, Seed: seed, Run: run, Iteration: m.Iteration, Model: m.Model, Agent: m.Agent,
			Step: m.Step, Loss: m.Loss, GradNorm: m.GradNorm, GradNormMax: m.GradNormMax, ClipFrac: m.ClipFrac, MeanAbsAdv: m.MeanAbsAdv,
		}
		name := m.Agent
		if name == "*" {
			name = "*" + m.Model
		}
		if a := scores[name]; a != nil && a.n > 0 {
			r.Rows, r.Reward = a.n, a.sum/float64(a.n)
		}
		if eval != nil {
			k, avg, pass := eval.K, eval.AvgAtK, eval.PassAtK
			r.EvalK, r.AvgAtK, r.PassAtK = &k, &avg, &pass
		}
		out = append(out, r)
	}
	return out, inputs, nil
}

func sortRows(rows []SummaryRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Estimator != b.Estimator {
			return a.Estimator < b.Estimator
		}
		if a.Seed != b.Seed {
			return a.Seed < b.Seed
		}
		if a.Iteration != b.Iteration {
			return a.Iteration < b.Iteration
		}
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if (a.Agent == "*") != (b.Agent == "*") {
			return a.Agent == "*"
		}
		return a.Agent < b.Agent
	})
}

// writeSummary commits the summary. A summary is a derived report: a different earlier one
// (other estimators or iterations) is replaced — its manifest is deleted first, so readers
// never see a manifest that does not match its file; the same one is kept, its file rewritten
// if it no longer matches.
func writeSummary(ctx context.Context, b storage.Bucket, src, dir string, rows []SummaryRow, inputs []commit.Input, params map[string]string) (string, error) {
	data, err := shards.EncodeTable(rows)
	if err != nil {
		return "", fmt.Errorf("ablate: encode summary: %w", err)
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Dir < inputs[j].Dir })
	m := &commit.Manifest{
		Kind: "ablation", SchemaVersion: 1, Run: src, Rows: int64(len(rows)),
		Files:  []commit.File{{Name: "summary.parquet", Rows: int64(len(rows)), Bytes: int64(len(data)), SHA256: commit.Digest(data)}},
		Inputs: inputs, Params: params,
	}
	want, err := commit.Encode(m)
	if err != nil {
		return "", err
	}
	mkey := path.Join(dir, commit.ManifestName)
	old, err := storage.ReadAll(ctx, b, mkey)
	switch {
	case err == nil && bytes.Equal(old, want):
		// The same summary is committed: keep it, unless its file was damaged or lost since
		// (readers refuse it then), which rewriting the same bytes repairs.
		have, err := storage.ReadAll(ctx, b, path.Join(dir, "summary.parquet"))
		if err == nil && bytes.Equal(have, data) {
			return commit.Digest(want), nil
		}
		if err != nil && !storage.IsNotFound(err) {
			return "", fmt.Errorf("ablate: %w", err)
		}
		if _, err := commit.PutFile(ctx, b, dir, "summary.parquet", data, int64(len(rows))); err != nil {
			return "", err
		}
		return commit.Digest(want), nil
	case err == nil:
		if err := b.Delete(ctx, mkey); err != nil {
			return "", fmt.Errorf("ablate: replace summary: %w", err)
		}
	case !storage.IsNotFound(err):
		return "", fmt.Errorf("ablate: %w", err)
	}
	if m.Files[0], err = commit.PutFile(ctx, b, dir, "summary.parquet", data, int64(len(rows))); err != nil {
		return "", err
	}
	return commit.Commit(ctx, b, dir, m)
}

// CopyFolder copies the committed folder srcDir of src to dstDir of dst: every file, verified
// against the manifest, then the manifest itself, byte for byte. A destination already committed
// with the same manifest is left as it is; with another, it is a conflict. A source without a
// manifest gives an error matching commit.ErrNotCommitted.
func CopyFolder(ctx context.Context, src storage.Bucket, srcDir string, dst storage.Bucket, dstDir string) (*commit.Manifest, error) {
	mkey := path.Join(srcDir, commit.ManifestName)
	raw, err := storage.ReadAll(ctx, src, mkey)
	if storage.IsNotFound(err) {
		return nil, fmt.Errorf("%s: %w", srcDir, commit.ErrNotCommitted)
	}
	if err != nil {
		return nil, err
	}
	m, err := commit.Decode(raw, mkey)
	if err != nil {
		return nil, err
	}
	dkey := path.Join(dstDir, commit.ManifestName)
	if have, err := storage.ReadAll(ctx, dst, dkey); err == nil {
		if !bytes.Equal(have, raw) {
			return nil, fmt.Errorf("%s is committed with other content than %s: %w", dstDir, srcDir, commit.ErrConflict)
		}
		return m, nil
	} else if !storage.IsNotFound(err) {
		return nil, err
	}
	for _, f := range m.Files {
		data, err := commit.ReadFile(ctx, src, srcDir, f)
		if err != nil {
			return nil, err
		}
		if err := storage.PutBytes(ctx, dst, path.Join(dstDir, f.Name), data); err != nil {
			return nil, err
		}
	}
	err = storage.PutBytes(ctx, dst, dkey, raw, storage.IfAbsent())
	if storage.IsAlreadyExists(err) {
		have, rerr := storage.ReadAll(ctx, dst, dkey)
		if rerr != nil || !bytes.Equal(have, raw) {
			return nil, fmt.Errorf("%s was committed concurrently with other content: %w", dstDir, commit.ErrConflict)
		}
		err = nil
	}
	return m, err
}

// WriteReport prints the summary: per (estimator, seed) and agent, the mean and max over the
// iterations of the grad norm (each iteration's mean over its updates, as `drmas report` and the
// gradnorm report take it), the peak mini-batch grad norm, mean loss and reward over the
// iterations, and the last evaluation. Iterations where the agent had no rows (it never acted:
// grad norm, loss and reward 0) are no updates and are left out, as in those reports.
func WriteReport(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "ablation %s of run %s (runs %s) → %s\n", r.Mode, r.Source, strings.Join(r.Runs, ", "), r.SummaryDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "estimator\tseed\tagent\titers\tgrad_norm mean\tgrad_norm max\tpeak mini-batch\tloss mean\treward mean\tavg@k last\tpass@k last\t")
	type key struct {
		est   string
		seed  uint64
		agent string
	}
	var order []key
	groups := map[key][]SummaryRow{}
	// The evaluation is of the published step, whether or not the agent acted: the last one
	// comes from every row, idle iterations included.
	evals := map[key]SummaryRow{}
	for _, row := range r.Rows {
		k := key{row.Estimator, row.Seed, row.Agent}
		if row.Agent == "*" {
			k.agent = "*" + row.Model
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
			groups[k] = nil // listed even if it never acts
		}
		if row.AvgAtK != nil {
			evals[k] = row
		}
		if row.Rows > 0 {
			groups[k] = append(groups[k], row)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].est != order[j].est {
			return order[i].est < order[j].est
		}
		if order[i].seed != order[j].seed {
			return order[i].seed < order[j].seed
		}
		return order[i].agent < order[j].agent
	})
	for _, k := range order {
		rows := groups[k]
		var gn, gmax, peak, loss, rew float64
		avg, pass := "-", "-"
		for _, x := range rows {
			gn += x.GradNorm
			gmax = math.Max(gmax, x.GradNorm)
			peak = math.Max(peak, x.GradNormMax)
			loss += x.Loss
			rew += x.Reward
		}
		if x, ok := evals[k]; ok {
			avg = strconv.FormatFloat(*x.AvgAtK, 'f', 3, 64)
			pass = strconv.FormatFloat(*x.PassAtK, 'f', 3, 64)
		}
		n := float64(max(len(rows), 1))
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%s\t%s\t\n", k.est, k.seed, k.agent, len(rows), gn/n, gmax, peak, loss/n, rew/n, avg, pass)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	return nil
}
