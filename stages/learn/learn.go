// Package learn is the learner stage: it zips an iteration's committed rollout parts with the
// chosen estimator's advantage sidecars and, per model, runs PPO-clip with token-mean
// aggregation (agents sharing a model are trained together; statistics stay per agent),
// AdamW and global grad-norm clipping. It publishes checkpoint step S+1 (S = the policy that
// generated the rollout), recording in its manifest the rollout and advantage folders it was
// trained on, and commits per-model and per-agent metrics, including each agent's own gradient
// norm (docs/design.md, "Learner").
//
// The iterations of a run are a chain: iteration N is sampled from step N and publishes step
// N+1. Learn refuses a rollout of the run sampled from another step (one rolled out out of
// order), but not an imported rollout, whose policy_version is whatever its file says, nor one
// copied from another run (an ablation replay: its iterations are independent what-ifs, each
// with checkpoints of its own); and it never takes a step that another iteration published as
// its own (see publishedEarlier).
//
// Old log-probs for the PPO ratio are recomputed with the pre-update policy at the sampling
// temperature (as verl does), so the ratio is exactly 1 on the first mini-batch; the stored
// behaviour log-probs are compared with them and the gap is reported (behaviour_gap), which
// exposes backends whose log-probs do not match the trained policy.
//
// The forward and backward passes run on an Engine: the GPU engine (gpu/engine) when NVML
// places the model's learner on a GPU and the CUDA driver opens it, the CPU engine (package
// model) otherwise; one line per model says which and why ("learner m1: CPU engine (...)").
// Checkpoints come from the host model and optimizer either way: on the GPU engine the
// gradients, clipping and AdamW run on the device (the CPU's AdamW arithmetic) and the
// weights and moments are copied back once per model and iteration, before publishing.
package learn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/devices"
	"github.com/drmas-dev/drmas/internal/invariants"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/storage"
)

// metricsFile is the one file of a learn folder.
const metricsFile = "metrics.parquet"

// Options select what to learn from.
type Options struct {
	Iteration int
	// Estimator names the advantage sidecar to use; default: learn.estimator.
	Estimator string
}

// MetricsRow is the persisted schema shards.MetricsRow, named here for this stage's callers.
type MetricsRow = shards.MetricsRow

// Result summarises a learner run.
type Result struct {
	Skipped bool
	Step    int64
	Metrics []MetricsRow
}

// Digest is the config digest of learner checkpoints: everything that changes what a learn
// computes. learn.keep_checkpoints (retention) does not, nor learn.estimator, which estimator
// replaces.
func Digest(cfg *configs.Config, estimator string) string {
	l := cfg.Learn.Canonical()
	l.KeepCheckpoints, l.Estimator = 0, ""
	return digestOf(cfg, l, estimator)
}

// SameConfig reports whether d, the digest a learn recorded, is cfg's for estimator.
func SameConfig(cfg *configs.Config, estimator, d string) bool {
	return d == Digest(cfg, estimator)
}

func digestOf(cfg *configs.Config, l configs.Learn, estimator string) string {
	return configs.Digest(struct {
		Seed      uint64
		Learn     configs.Learn
		Estimator string
		Agents    map[string]configs.Agent
		Models    map[string]configs.Model
		Temp      float64
	}{cfg.Seed, l, estimator, cfg.Agents, cfg.Models, cfg.Rollout.Temperature})
}

// earlierAttempt is what publishedEarlier found.
type earlierAttempt struct {
	Found   bool // the step is published and its metrics are there: commit them
	Metrics []MetricsRow
	File    commit.File
	// Digest is the config digest to publish the step under: Digest, which a published step
	// this iteration may take records too.
	Digest string
}

// publishedEarlier finds the work of an earlier attempt at this iteration that published
// step version+1 and died before committing its metrics (a crash, a signal, a store error).
// Training again would not do: on another engine or CPU the bits differ and the publish
// would conflict. Run writes the metrics before publishing, so they are there; ok is false
// when the step is not published (train as usual).
//
// The step is this iteration's only if it was trained from the same parent, config and inputs
// (the iteration's rollout and advantage folders, by manifest sha256, which Publish records):
// a step another iteration published (one run out of order), or this iteration from other
// inputs, is an error that says whose it is; so is a step that records no rollout among its
// inputs (no learn published it). When this iteration's metrics are gone (a publish conflict
// removed them), this iteration trains: the same bits are the same step (Publish takes them),
// other bits conflict (see publishConflict).
func publishedEarlier(ctx context.Context, env *stages.Env, iter int, outDir string, version int64, est string, inputs []commit.Input) (e earlierAttempt, err error) {
	run, next := env.Config.Run, version+1
	digest := Digest(env.Config, est)
	e.Digest = digest
	cm, _, err := commit.Read(ctx, env.Bucket, layout.CheckpointDir(run, next))
	if errors.Is(err, commit.ErrNotCommitted) {
		return e, nil
	} else if err != nil {
		return e, err
	}
	if cm.Parent == nil || *cm.Parent != version || !SameConfig(env.Config, est, cm.ConfigDigest) {
		parent := "none"
		if cm.Parent != nil {
			parent = strconv.FormatInt(*cm.Parent, 10)
		}
		return e, &ConflictError{Iter: iter, What: fmt.Sprintf("checkpoint step %d is already published from parent %s with config %.12s (%s), not from step %d with config %.12s",
			next, parent, cm.ConfigDigest, publishedBy(cm), version, digest)}
	}
	switch by, recorded := publisher(cm); {
	case recorded && by != iter:
		return e, &ConflictError{Iter: iter, What: fmt.Sprintf("checkpoint step %d is already published (%s), so iteration %d cannot publish its update: %s",
			next, publishedBy(cm), iter, inOrder(run, by))}
	case recorded && !slices.Equal(cm.Inputs, inputs):
		return e, &ConflictError{Iter: iter, What: fmt.Sprintf("checkpoint step %d was published by this iteration's learn from other inputs (%s), not from %s: the iteration's rollout or advantages changed after it was learned",
			next, describeInputs(cm.Inputs), describeInputs(inputs))}
	case !recorded:
		return e, &ConflictError{Iter: iter, What: fmt.Sprintf("checkpoint step %d is already published (%s), so iteration %d cannot publish its update",
			next, publishedBy(cm), iter)}
	}
	key := path.Join(outDir, metricsFile)
	data, err := storage.ReadAll(ctx, env.Bucket, key)
	if storage.IsNotFound(err) {
		return e, nil // a publish conflict removed them: train again; the same bits publish as the same step
	} else if err != nil {
		return e, fmt.Errorf("read the metrics of the earlier attempt: %w", err)
	}
	metrics, err := shards.ReadTable[MetricsRow](bytes.NewReader(data), int64(len(data)), key)
	if err != nil {
		return e, err
	}
	for _, r := range metrics {
		if r.Step != next {
			return e, fmt.Errorf("%s: metrics of step %d, not of the published step %d", key, r.Step, next)
		}
	}
	if err := checkpoints.SetLatest(ctx, env.Bucket, run, next); err != nil { // it may have died before
		return e, err
	}
	e.Metrics, e.Found = metrics, true
	e.File = commit.File{Name: metricsFile, Rows: int64(len(metrics)), Bytes: int64(len(data)), SHA256: commit.Digest(data)}
	return e, nil
}

// publisher returns the iteration whose rollout a checkpoint manifest records among its inputs;
// ok is false when it records none (the warm-up).
func publisher(cm *commit.Manifest) (iter int, ok bool) {
	for _, in := range cm.Inputs {
		if rest, isRollout := strings.CutSuffix(in.Dir, "/rollout"); isRollout {
			if n, ok := layout.ParseIterDir(path.Base(rest)); ok {
				return n, true
			}
		}
	}
	return 0, false
}

// publishedBy says who published a checkpoint step and from which parent, for errors.
func publishedBy(cm *commit.Manifest) string {
	from := "from no parent"
	if cm.Parent != nil {
		from = fmt.Sprintf("from step %d", *cm.Parent)
	}
	if by, ok := publisher(cm); ok {
		return fmt.Sprintf("by iteration %d's learn, %s", by, from)
	}
	return "recording no rollout among its inputs, " + from
}

// describeInputs lists input folders with their manifests' digests, for errors.
func describeInputs(ins []commit.Input) string {
	var parts []string
	for _, in := range ins {
		parts = append(parts, fmt.Sprintf("%s (manifest %.12s)", in.Dir, in.ManifestSHA256))
	}
	return strings.Join(parts, ", ")
}

// inOrder says why a step that iteration by, not this one, published is not this one's.
func inOrder(run string, by int) string {
	return fmt.Sprintf("the iterations of a run must run in order (iteration N samples from step N and publishes step N+1; `drmas run` runs them so), "+
		"and this run's step belongs to iteration %d (%s)", by, layout.IterDir(run, by))
}

// outOfOrder is the error of an iteration whose rollout was not sampled from step iter: one
// rolled out before the iterations ahead of it had learned (rollout refuses that itself; an
// older rollout folder may still hold one).
func outOfOrder(run string, iter int, version int64) error {
	return &ConflictError{Remedy: RollOutAgain, Iter: iter, Step: version, Dir: layout.IterDir(run, iter),
		What: fmt.Sprintf("its rollout was sampled from step %d, but iteration %d samples from %s (the iterations of a run run in order)", version, iter, stages.ChainStep(int64(iter)))}
}

// Run trains on one iteration. If its metrics are committed already, Run only deletes the
// steps learn.keep_checkpoints no longer keeps (a learn killed after its commit left them).
// Its errors name the stage once ("learn iter N: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	res, err := runStage(ctx, env, o)
	if err != nil {
		return nil, stages.Fail(ctx, stages.IterName("learn", o.Iteration), err)
	}
	return res, nil
}

// runStage is the protocol: skip a committed learn; read the committed rollout and advantages
// and the policy that sampled them; take up a step an earlier attempt published, or train each
// model and publish the step (metrics uploaded first); commit the metrics last.
func runStage(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	est := o.Estimator
	if est == "" {
		est = env.Config.Learn.Estimator
	}
	specs, err := normalize.ParseSpecs([]string{est}, env.Config.Normalize.Eps)
	if err != nil {
		return nil, err
	}
	l := &stageRun{env: env, cfg: env.Config, b: env.Bucket, iter: o.Iteration, est: specs[0].Name()}
	l.outDir = layout.LearnDir(l.cfg.Run, l.iter)
	if res, done, err := l.committed(ctx); done || err != nil {
		return res, err
	}
	if err := l.readInputs(ctx); err != nil {
		return nil, err
	}
	earlier, err := publishedEarlier(ctx, env, l.iter, l.outDir, l.version, l.est, l.inputs)
	if err != nil {
		return nil, err
	} else if earlier.Found {
		env.Logf("learn iter %d: step %d was published by an earlier attempt; committing its metrics", l.iter, l.version+1)
		return l.commitMetrics(ctx, earlier.Metrics, earlier.File)
	}
	out, metrics, err := l.train(ctx)
	if err != nil {
		return nil, err
	}
	f, err := l.publish(ctx, out, metrics, earlier.Digest)
	if err != nil {
		return nil, err
	}
	return l.commitMetrics(ctx, metrics, f)
}

// stageRun is one learn of one iteration and what it reads.
type stageRun struct {
	env    *stages.Env
	cfg    *configs.Config
	b      storage.Bucket
	iter   int
	est    string // the estimator's canonical name
	outDir string

	inDir, advDir string
	in, adv       *commit.Manifest
	inSHA, advSHA string
	version       int64            // the step that sampled the rollout; this learn publishes version+1
	set           *checkpoints.Set // that step
	inputs        []commit.Input   // what the step is trained on, recorded in its manifest
}

// committed reports whether the learn folder is committed (then the result is
// alreadyCommitted's). Metrics committed for a step whose commit was withdrawn since (a learn
// of this iteration with other settings replaced one of its files) describe no step: they are
// withdrawn too, and this learn runs again.
func (l *stageRun) committed(ctx context.Context) (*Result, bool, error) {
	m, msha, err := commit.Read(ctx, l.b, l.outDir)
	switch {
	case err == nil:
		if m.Kind != "learn" || m.Step == nil {
			return nil, true, fmt.Errorf("%s holds a %q manifest without a step, not the learn manifest drmas writes", l.outDir, m.Kind)
		}
		if have := m.Params["estimator"]; have != l.est {
			return nil, true, &ConflictError{Remedy: OtherEstimator, Iter: l.iter, What: fmt.Sprintf("already committed with estimator %s, not %s", have, l.est)}
		}
		gone, err := stepWithdrawn(ctx, l.b, l.cfg.Run, *m.Step)
		if err != nil {
			return nil, true, err
		}
		if !gone {
			res, err := alreadyCommitted(ctx, l.env, l.iter, l.outDir, m)
			return res, true, err
		}
		l.env.Warnf("learn iter %d: step %d, which the committed metrics describe, is not committed (its commit was withdrawn): learning again", l.iter, *m.Step)
		if err := commit.Withdraw(ctx, l.b, l.outDir, msha); err != nil {
			return nil, true, err
		}
	case !errors.Is(err, commit.ErrNotCommitted):
		return nil, true, err
	}
	return nil, false, nil
}

// readInputs reads the committed rollout and the estimator's advantages computed from it, and
// loads the step that sampled the rollout.
func (l *stageRun) readInputs(ctx context.Context) error {
	cfg, b, iter, est := l.cfg, l.b, l.iter, l.est
	l.inDir = layout.RolloutDir(cfg.Run, iter)
	var err error
	l.in, l.inSHA, err = commit.Read(ctx, b, l.inDir)
	if err != nil && !errors.Is(err, commit.ErrNotCommitted) { // I/O, permissions, a corrupt manifest: commit.Read names the folder
		return err
	}
	if err != nil {
		return fmt.Errorf("rollout is not committed (%s): %w", stages.RolloutFirst(ctx, l.env, iter, ", then normalize,"), err)
	}
	l.advDir = layout.AdvantageDir(cfg.Run, iter, est)
	l.adv, l.advSHA, err = commit.Read(ctx, b, l.advDir)
	if err != nil && !errors.Is(err, commit.ErrNotCommitted) {
		return err
	}
	if err != nil {
		return fmt.Errorf("advantages for estimator %s are not committed (run `drmas run-stage normalize --iter %d --estimator %s`): %w", est, iter, est, err)
	}
	if !l.adv.ComputedFrom(l.inDir, l.inSHA) {
		return &stages.StaleAdvantagesError{Dir: l.advDir, Diagnostics: layout.DiagnosticsDir(cfg.Run, iter, est), Iter: iter, Estimator: est,
			What: fmt.Sprintf("%s/ was computed from another rollout than the one now in %s/ (the rollout was replaced since)", l.advDir, l.inDir)}
	}
	if l.version, err = strconv.ParseInt(l.in.Params["policy_version"], 10, 64); err != nil {
		return fmt.Errorf("rollout manifest has no policy_version")
	}
	// Iteration N samples from step N (the loop's order; rollout refuses any other step, and
	// labels an all-external config's iteration N with step N too). An imported rollout's
	// policy_version is the step its file names; a rollout copied from another run (an
	// ablation replay, whose manifest still names its source) is a what-if with checkpoints of
	// its own. Checked before the step is loaded: retention may have deleted it since.
	chained := l.in.Params["imported"] != "true" && l.in.Run == cfg.Run
	if chained && l.version != int64(iter) {
		return outOfOrder(cfg.Run, iter, l.version)
	}
	if l.set, err = stages.LoadPolicy(ctx, l.env, l.version, true); err != nil {
		return fmt.Errorf("load the policy that generated the rollout: %w", err)
	}
	// publishedEarlier resumes only a step trained on exactly these.
	l.inputs = []commit.Input{{Dir: l.inDir, ManifestSHA256: l.inSHA}, {Dir: l.advDir, ManifestSHA256: l.advSHA}}
	return nil
}

// train reads the iteration's rows and advantages and trains each model served here, and
// returns the step to publish with the metrics.
func (l *stageRun) train(ctx context.Context) (*checkpoints.Set, []MetricsRow, error) {
	cfg, set, version := l.cfg, l.set, l.version
	rows, advs, err := readIteration(ctx, l.env, l.inDir, l.in, l.advDir, l.adv)
	if err != nil {
		return nil, nil, err
	}
	if err := modelsKnown(cfg, rows); err != nil {
		return nil, nil, err
	}
	var ref *checkpoints.Set
	if cfg.Learn.KLCoef > 0 && cfg.Learn.KLRef != "base" {
		if ref, err = stages.LoadPolicy(checkpoints.WithFrozenWeights(ctx), l.env, 0, false); err != nil {
			return nil, nil, fmt.Errorf("load the reference policy (step 0): %w", err)
		}
	}
	out := &checkpoints.Set{Step: version + 1, Parent: version, Models: set.Models, HF: set.HF, Optims: map[string]*model.AdamW{}, Inputs: l.inputs}
	var metrics []MetricsRow
	for _, id := range cfg.ModelNames() {
		if cfg.Models[id].External() {
			continue // served elsewhere (openai backend without sizes): not trained here
		}
		m, ok := set.Trainable(id)
		if !ok {
			return nil, nil, fmt.Errorf("checkpoint step %d has no model %s", version, id)
		}
		var refModel model.Trainable
		switch {
		case ref != nil:
			if refModel, ok = ref.Trainable(id); !ok {
				return nil, nil, fmt.Errorf("the reference policy (step 0) has no model %s", id)
			}
		case cfg.Learn.KLCoef > 0:
			if refModel, err = adapterOff(id, m); err != nil {
				return nil, nil, err
			}
		}
		mrows, opt, err := trainModel(ctx, l.env, l.iter, l.est, id, m, set.Optims[id], refModel, rows, advs)
		if err != nil {
			return nil, nil, err
		}
		out.Optims[id] = opt
		mem, util := gpuTelemetry(ctx)
		for i := range mrows {
			mrows[i].Step = out.Step
			mrows[i].GPUMemoryUsed, mrows[i].GPUUtilization = mem, util
		}
		metrics = append(metrics, mrows...)
	}
	return out, metrics, nil
}

// modelsKnown requires every row to belong to a configured model: rows of another (an import
// whose model column names none of ours) would be skipped, and the step published having
// learnt nothing.
func modelsKnown(cfg *configs.Config, rows []shards.Row) error {
	unknown := map[string]int{}
	for i := range rows {
		if _, ok := cfg.Models[rows[i].Model]; !ok {
			unknown[rows[i].Model]++
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var what []string
	for _, m := range stages.SortedKeys(unknown) {
		what = append(what, fmt.Sprintf("%d of model %q", unknown[m], m))
	}
	return fmt.Errorf("rollout rows %s, which the config does not have (models: %s): map the agents to configured models (the model column of an import)", strings.Join(what, ", "), strings.Join(cfg.ModelNames(), ", "))
}

// publish uploads the metrics (uncommitted, so invisible) and then publishes the step: an
// attempt that dies after publishing leaves both, and publishedEarlier picks them up.
func (l *stageRun) publish(ctx context.Context, out *checkpoints.Set, metrics []MetricsRow, digest string) (commit.File, error) {
	data, err := shards.EncodeTable(metrics)
	if err != nil {
		return commit.File{}, fmt.Errorf("encode metrics: %w", err)
	}
	f, err := commit.PutFile(ctx, l.b, l.outDir, metricsFile, data, int64(len(metrics)))
	if err != nil {
		return commit.File{}, err
	}
	if _, err := checkpoints.Publish(ctx, l.b, l.cfg.Run, out, digest); errors.Is(err, commit.ErrConflict) {
		return commit.File{}, publishConflict(ctx, l.env, l.iter, l.outDir, out.Step, l.inputs, f, err)
	} else if err != nil {
		return commit.File{}, err
	}
	return f, nil
}

// commitMetrics commits the learn folder for the published step version+1, then lets
// retention delete older steps.
func (l *stageRun) commitMetrics(ctx context.Context, metrics []MetricsRow, f commit.File) (*Result, error) {
	cfg, b, iter, version := l.cfg, l.b, l.iter, l.version
	step := version + 1
	// A concurrent learn of other weights may have replaced a file of the step and so
	// withdrawn its commit (commit.ErrWithdrawn): these metrics then describe no step.
	if ok, err := commit.IsCommitted(ctx, b, layout.CheckpointDir(cfg.Run, step)); err != nil {
		return nil, err
	} else if !ok {
		return nil, &ConflictError{Remedy: OneLearn, Iter: iter, Err: commit.ErrWithdrawn,
			What: fmt.Sprintf("step %d, which this learn published, is no longer committed: a learn of this iteration with other settings ran at the same time and replaced one of its files, which withdrew the commit", step)}
	}
	if _, err := commit.Commit(ctx, b, l.outDir, &commit.Manifest{
		Kind: "learn", SchemaVersion: 1, Run: cfg.Run, Iteration: &l.iter, Step: &step,
		Rows: int64(len(metrics)), Files: []commit.File{f}, ConfigDigest: Digest(cfg, l.est),
		Inputs: []commit.Input{{Dir: l.inDir, ManifestSHA256: l.inSHA}, {Dir: l.advDir, ManifestSHA256: l.advSHA},
			{Dir: layout.CheckpointDir(cfg.Run, version), ManifestSHA256: l.set.ManifestSHA256}},
		Params: map[string]string{"estimator": l.est},
	}); err != nil {
		return nil, err
	}
	// Only now may older steps go: until the metrics commit, a rerun of this iteration
	// needs step `version`, the policy that generated the rollout.
	if _, err := checkpoints.Retain(ctx, b, cfg.Run, cfg.Learn.KeepCheckpoints); err != nil {
		l.env.Warnf("learn iter %d: old checkpoints beyond learn.keep_checkpoints are not all deleted (the next learn retries): %v", iter, err)
	}
	for _, r := range metrics {
		if r.Agent == "*" {
			l.env.Logf("learn iter %d model %s: %d rows %d tokens, loss %.4f, grad norm %.3f (max %.3f), clip %.3f, kl %.2e, entropy %.3f → step %d",
				iter, r.Model, r.Rows, r.Tokens, r.Loss, r.GradNorm, r.GradNormMax, r.ClipFrac, r.ApproxKL, r.Entropy, step)
		}
	}
	return &Result{Step: step, Metrics: metrics}, nil
}

// publishConflict is the error of a publish that found step already committed with other
// content, or that a concurrent publisher of other weights kept from committing. If this
// iteration's learn published it from the same inputs (an earlier attempt on another engine,
// whose metrics are gone), the metrics this attempt wrote stay for the rerun to commit with it.
// Otherwise it is another learn's update, and this attempt's metrics (mine) go: they describe
// weights that were not published, and a rerun must not commit them against the step that was.
func publishConflict(ctx context.Context, env *stages.Env, iter int, outDir string, step int64, inputs []commit.Input, mine commit.File, err error) error {
	cm, _, rerr := commit.Read(ctx, env.Bucket, layout.CheckpointDir(env.Config.Run, step))
	if rerr == nil && slices.Equal(cm.Inputs, inputs) {
		return fmt.Errorf("step %d was published by an earlier attempt at this iteration, from the same inputs but with other weights (another engine's), and its metrics are gone: run learn again to commit this attempt's metrics with the published step: %w", step, err)
	}
	// Only this attempt's own upload: the metrics object of an uncommitted folder may be
	// another learn's by now (one that runs at the same time and is about to commit it).
	if derr := commit.RemoveUpload(ctx, env.Bucket, outDir, mine); derr != nil && !storage.IsNotFound(derr) {
		err = fmt.Errorf("%w (and removing this attempt's metrics failed: %v)", err, derr)
	}
	if errors.Is(rerr, commit.ErrNotCommitted) {
		// Not committed: another learn of this iteration with other settings wrote the step at
		// the same moment, and one's upload replaced the other's file (commit.Commit refused
		// it, or the commit was withdrawn): neither update is published.
		return &ConflictError{Remedy: OneLearn, Iter: iter, Err: err, What: fmt.Sprintf("another learn of this iteration, with other settings, wrote step %d at the same time and one replaced the other's files, so this learn's update is not published (nor, unless it finishes first, the other's)", step)}
	}
	who := "by another learn"
	if rerr == nil {
		who = publishedBy(cm)
	}
	return &ConflictError{Iter: iter, Err: err, What: fmt.Sprintf("step %d is already published (%s) with other weights: the iterations of a run must run in order, each learned once "+
		"(iteration N samples from step N and publishes step N+1; `drmas run` runs them so); this iteration's update cannot be published", step, who)}
}

// alreadyCommitted is the result of a learn whose folder is committed with this estimator and
// whose step stands: nothing to train, unless the rollout was replaced since.
func alreadyCommitted(ctx context.Context, env *stages.Env, iter int, outDir string, m *commit.Manifest) (*Result, error) {
	cfg, b := env.Config, env.Bucket
	// Committed from a rollout that was replaced since: the step it published was trained
	// on other rows, and this rerun must not pass for training on the new ones.
	inDir := layout.RolloutDir(cfg.Run, iter)
	if _, inSHA, err := commit.Read(ctx, b, inDir); err == nil && !m.ComputedFrom(inDir, inSHA) {
		return nil, &ConflictError{Remedy: RelearnOrAnotherRun, Iter: iter, Step: *m.Step, Dir: outDir, Err: commit.ErrConflict,
			What: fmt.Sprintf("%s/ was committed (step %d) from another rollout than the one now in %s/ (the rollout was replaced since), so step %d was trained on other rows",
				outDir, *m.Step, inDir, *m.Step)}
	} else if err != nil && !errors.Is(err, commit.ErrNotCommitted) { // a rollout deleted since is fine: nothing replaced it
		return nil, err
	}
	env.Logf("learn iter %d: already committed", iter)
	// A learn killed after its commit but before retention left the steps beyond
	// learn.keep_checkpoints; a resumed run skips this iteration, so delete them here.
	if _, err := checkpoints.Retain(ctx, b, cfg.Run, cfg.Learn.KeepCheckpoints); err != nil {
		env.Warnf("learn iter %d: old checkpoints beyond learn.keep_checkpoints are not all deleted (the next learn retries): %v", iter, err)
	}
	return &Result{Skipped: true, Step: *m.Step}, nil
}

// stepWithdrawn reports whether step is not committed while no later step is: the newest step,
// withdrawn (retention deletes only older steps).
func stepWithdrawn(ctx context.Context, b storage.Bucket, run string, step int64) (bool, error) {
	steps, err := checkpoints.Steps(ctx, b, run)
	if err != nil {
		return false, err
	}
	return !slices.Contains(steps, step) && (len(steps) == 0 || steps[len(steps)-1] < step), nil
}

// gpuTelemetry returns the most loaded device's memory in use and utilisation, or zeros in CPU
// mode (devices.Telemetry never calls NVML after a failed init).
func gpuTelemetry(ctx context.Context) (int64, int32) {
	samples, err := devices.Telemetry(ctx)
	if err != nil || len(samples) == 0 {
		return 0, 0
	}
	var mem int64
	var util int32
	for _, s := range samples {
		mem = max(mem, int64(s.MemoryUsed))
		util = max(util, int32(s.Utilization))
	}
	return mem, util
}

// readIteration loads every rollout part (sha256-verified) and its sidecar, checking that they
// are row-aligned, and returns both in canonicalOrder (the order the learner trains in).
func readIteration(ctx context.Context, env *stages.Env, inDir string, in *commit.Manifest, advDir string, adv *commit.Manifest) ([]shards.Row, []shards.AdvantageRow, error) {
	sidecars := map[string]commit.File{}
	for _, f := range adv.Files {
		sidecars[f.Name] = f
	}
	var rows []shards.Row
	var advs []shards.AdvantageRow
	for _, f := range in.Files {
		sf, ok := sidecars[f.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%s has no sidecar for rollout part %s", advDir, f.Name)
		}
		data, err := commit.ReadFile(ctx, env.Bucket, inDir, f)
		if err != nil {
			return nil, nil, err
		}
		r, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), path.Join(inDir, f.Name))
		if err != nil {
			return nil, nil, err
		}
		data, err = commit.ReadFile(ctx, env.Bucket, advDir, sf)
		if err != nil {
			return nil, nil, err
		}
		a, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), path.Join(advDir, sf.Name))
		if err != nil {
			return nil, nil, err
		}
		if len(a) != len(r) {
			return nil, nil, fmt.Errorf("%s has %d rows but its sidecar %d", f.Name, len(r), len(a))
		}
		for i := range r {
			if r[i].RowID != a[i].RowID {
				return nil, nil, fmt.Errorf("%s row %d: row_id %d but sidecar row_id %d: not row-aligned", f.Name, i, r[i].RowID, a[i].RowID)
			}
		}
		rows = append(rows, r...)
		advs = append(advs, a...)
	}
	order := canonicalOrder(rows)
	sortedRows, sortedAdvs := make([]shards.Row, len(rows)), make([]shards.AdvantageRow, len(advs))
	for j, i := range order {
		sortedRows[j], sortedAdvs[j] = rows[i], advs[i]
	}
	return sortedRows, sortedAdvs, nil
}

// canonicalOrder returns the indices of rows sorted by (task_id, sample, step, agent), stably:
// the order the learner's seeded permutation draws its mini-batches from. A rollout stores
// its groups sorted by uid, which derives from the run's name, so in stored order two runs of
// one seed (an on-policy ablation's estimators) would train on other mini-batches of the same
// rows; in this order they differ only by what they are meant to.
func canonicalOrder(rows []shards.Row) []int {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := &rows[idx[a]], &rows[idx[b]]
		switch {
		case x.TaskID != y.TaskID:
			return x.TaskID < y.TaskID
		case x.Sample != y.Sample:
			return x.Sample < y.Sample
		case x.Step != y.Step:
			return x.Step < y.Step
		}
		return x.Agent < y.Agent
	})
	return idx
}

// trainModel runs the PPO epochs of one model and returns its metrics rows (model row first,
// then agents sorted: the model's configured agents and any other agent its rows name).
func trainModel(ctx context.Context, env *stages.Env, iter int, est, id string, m model.Trainable, opt *model.AdamW, ref model.Trainable, rows []shards.Row, advs []shards.AdvantageRow) ([]MetricsRow, *model.AdamW, error) {
	cfg := env.Config
	agents := cfg.AgentsOf(id)
	hp := cfg.OptimOf(agents[0])
	h := Hyper{ClipLow: hp.ClipLow, ClipHigh: hp.ClipHigh, KLCoef: cfg.Learn.KLCoef, Temperature: float32(cfg.Rollout.Temperature), MicroBatch: hp.MicroBatch,
		Objective: objectiveOf(cfg.Learn, cfg.Rollout.MaxTokens)}
	exs, behaviour, err := examplesOf(id, rows, advs)
	if err != nil {
		return nil, nil, err
	}
	eng, release, err := engineFor(cfg, id, m, env.Logf)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	h.MicroBatch = planSteps(cfg, id, m, eng, h.MicroBatch, env.Logf).micro
	if err := scoreOld(eng, id, m, ref, exs, h); err != nil {
		return nil, nil, err
	}
	var behaviourGap float64
	stored := 0
	for i, lps := range behaviour {
		for t, lp := range lps {
			behaviourGap += math.Abs(float64(lp) - float64(exs[i].Old[t]))
		}
		stored += len(lps)
	}
	if opt == nil {
		ocfg := model.DefaultAdamWConfig()
		ocfg.WeightDecay = cfg.Learn.WeightDecay
		opt = m.NewOptimizer(ocfg)
	}
	opt.LR = hp.LR
	opt.WeightDecay = cfg.Learn.WeightDecay
	accs, updates, err := runEpochs(ctx, env, iter, id, eng, m, opt, exs, h, hp, agents)
	if err != nil {
		return nil, nil, err
	}
	// The GPU engine ran the optimizer steps on its device: copy the weights and moments
	// back before the caller checkpoints them.
	if err := eng.Sync(); err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", id, err)
	}
	out := metricsRows(iter, est, id, agents, accs, updates, h.RolloutIS != "")
	out[0].BehaviourGap = div(behaviourGap, int64(stored))
	addRowStats(out, id, rows, advs)
	return out, opt, nil
}

// examplesOf returns the training examples of model id's rows with their advantages, and the
// stored behaviour log-probs of each, to compare with the recomputed ones.
func examplesOf(id string, rows []shards.Row, advs []shards.AdvantageRow) (exs []Example, behaviour [][]float32, err error) {
	var uids []string
	for i := range rows {
		r := &rows[i]
		if r.Model != id || len(r.ResponseIDs) == 0 {
			continue
		}
		if len(r.ResponseLogprobs) != len(r.ResponseIDs) {
			return nil, nil, fmt.Errorf("row %d (agent %s) has no behaviour log-probs: its backend did not return them (an openai backend in chat mode has none: use mode completions), so it cannot be trained with PPO", r.RowID, r.Agent)
		}
		exs = append(exs, Example{Agent: r.Agent, Seq: model.Sequence{Prompt: r.PromptIDs, Response: r.ResponseIDs}, Advantage: advs[i].Advantage,
			Behaviour: r.ResponseLogprobs})
		behaviour = append(behaviour, r.ResponseLogprobs)
		uids = append(uids, r.UID)
	}
	balanceWeights(exs, uids)
	return exs, behaviour, nil
}

// balanceWeights sets each example's Weight for agent_balance inverse_count, as the reference
// code's balance_loss_by_agent_freq: 1/n for the n examples of its (prompt group, agent), over
// the mean of those over all examples, so the weights average 1.
func balanceWeights(exs []Example, uids []string) {
	type key struct{ uid, agent string }
	n := map[key]int{}
	for i := range exs {
		n[key{uids[i], exs[i].Agent}]++
	}
	var mean float64
	for i := range exs {
		mean += 1 / float64(n[key{uids[i], exs[i].Agent}])
	}
	mean /= float64(len(exs))
	for i := range exs {
		exs[i].Weight = 1 / float64(n[key{uids[i], exs[i].Agent}]) / mean
	}
}

// scoreOld sets the old (and, with ref, reference) log-probs of exs from the pre-update policy,
// in micro-batches: one sweep per model, so an engine that holds one model's weights on a
// device loads each once.
func scoreOld(eng Engine, id string, m, ref model.Trainable, exs []Example, h Hyper) error {
	score := func(sm model.Trainable, what string, set func(ex *Example, lp []float32)) error {
		for lo := 0; lo < len(exs); lo += h.MicroBatch {
			hi := min(lo+h.MicroBatch, len(exs))
			seqs := make([]model.Sequence, hi-lo)
			for j := range seqs {
				seqs[j] = exs[lo+j].Seq
			}
			lps, err := eng.Score(sm, seqs, h.Temperature)
			if err != nil {
				return fmt.Errorf("score %s %s: %w", what, id, err)
			}
			for j := range seqs {
				set(&exs[lo+j], lps[j])
			}
		}
		return nil
	}
	if err := score(m, "model", func(ex *Example, lp []float32) { ex.Old = lp }); err != nil {
		return err
	}
	if ref != nil {
		return score(ref, "reference", func(ex *Example, lp []float32) { ex.Ref = lp })
	}
	return nil
}

// acc sums one agent's (or, as "*", the model's) statistics over the updates.
type acc struct {
	rows, tokens                                  int64 // per epoch: the metrics' Rows, Tokens
	seen                                          int64 // tokens over all epochs: the ratios' denominator
	loss, gn, gnMax, clip, kl, refKL, ent, absAdv float64
	ratioMax                                      float64
	clipLow, clipHigh, dual                       float64 // tokens, as clip
	isUnits, isCapped                             int64
	isSum, isMax                                  float64
}

// runEpochs runs the PPO updates of one model: per epoch, a seeded permutation of exs cut into
// learn.mini_batches, each update at the learning rate learn.lr_schedule gives the optimizer's
// step. It returns the statistics per agent ("*": the model) and the number of updates that saw
// tokens.
func runEpochs(ctx context.Context, env *stages.Env, iter int, id string, eng Engine, m model.Trainable, opt *model.AdamW, exs []Example, h Hyper, hp configs.Optim, agents []string) (map[string]*acc, int, error) {
	cfg := env.Config
	sched := scheduleOf(cfg, hp.LR)
	accs := map[string]*acc{"*": {}}
	for _, a := range agents {
		accs[a] = &acc{}
	}
	updates := 0
	nmb := cfg.Learn.MiniBatches
	bar := progress.New(env.Progress, int64(cfg.Learn.Epochs*nmb), fmt.Sprintf("learn iter %d %s", iter, id), "updates")
	for epoch := 0; epoch < cfg.Learn.Epochs; epoch++ {
		rng := rand.New(rand.NewPCG(seeds.Derive(cfg.Seed, "learn", iter, id, epoch), 3))
		perm := rng.Perm(len(exs))
		for mb := 0; mb < nmb; mb++ {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			lo, hi := mb*len(exs)/nmb, (mb+1)*len(exs)/nmb
			batch := make([]Example, 0, hi-lo)
			for _, i := range perm[lo:hi] {
				batch = append(batch, exs[i])
			}
			opt.LR = sched.at(opt.Steps)
			st, err := UpdateOn(eng, m, opt, batch, h, hp.GradClip)
			if err != nil {
				return nil, 0, fmt.Errorf("model %s: %w", id, err)
			}
			if invariants.Enabled && epoch == 0 && mb == 0 {
				if err := checkFirstUpdate(st); err != nil {
					return nil, 0, fmt.Errorf("model %s: %w", id, err)
				}
			}
			if st.Tokens == 0 {
				continue
			}
			updates++
			addUpdate(accs, st, epoch == 0)
			bar.Add(1)
		}
	}
	bar.Finish()
	return accs, updates, nil
}

// addUpdate adds one update's statistics to accs; rows and tokens count in the first epoch only.
func addUpdate(accs map[string]*acc, st Stats, firstEpoch bool) {
	all := accs["*"]
	all.loss += st.Loss
	all.gn += st.GradNorm
	all.gnMax = math.Max(all.gnMax, st.GradNorm)
	// Sorted agents: the model row's float sums must not depend on map order.
	for _, a := range stages.SortedKeys(st.Agents) {
		as := st.Agents[a]
		x := accs[a]
		if x == nil {
			x = &acc{}
			accs[a] = x
		}
		x.loss += as.Loss
		x.gn += as.GradNorm
		x.gnMax = math.Max(x.gnMax, as.GradNorm)
		for _, y := range []*acc{x, all} {
			if firstEpoch {
				y.rows += int64(as.Rows)
				y.tokens += int64(as.Tokens)
			}
			y.seen += int64(as.Tokens)
			y.clip += float64(as.ClipTokens)
			y.kl += as.SumLogRatioSq / 2
			y.refKL += as.SumKL
			y.ent += as.SumEntropy
			y.absAdv += as.SumAbsAdv
			y.ratioMax = math.Max(y.ratioMax, as.MaxRatio)
			y.clipLow += float64(as.ClipLowTokens)
			y.clipHigh += float64(as.ClipHighTokens)
			y.dual += float64(as.DualClipTokens)
			y.isUnits += int64(as.ISUnits)
			y.isCapped += int64(as.ISCapped)
			y.isSum += as.SumIS
			y.isMax = math.Max(y.isMax, as.MaxIS)
		}
	}
}

// div is v/n, 0 when n is 0.
func div(v float64, n int64) float64 {
	if n == 0 {
		return 0
	}
	return v / float64(n)
}

// metricsRows turns the sums into metrics rows: the model's ("*") first, then agents sorted.
// An agent that the config does not give this model (an import's model column names it for
// its rows) is trained with it, and its statistics get a row of their own too.
func metricsRows(iter int, est, id string, agents []string, accs map[string]*acc, updates int, rolloutIS bool) []MetricsRow {
	names := slices.Clone(agents)
	for a := range accs {
		if a != "*" && !slices.Contains(agents, a) {
			names = append(names, a)
		}
	}
	slices.Sort(names)
	var out []MetricsRow
	for _, a := range append([]string{"*"}, names...) {
		x := accs[a]
		out = append(out, MetricsRow{
			Iteration: int32(iter), Estimator: est, Model: id, Agent: a, Rows: x.rows, Tokens: x.tokens, Updates: int32(updates),
			Loss: div(x.loss, int64(updates)), GradNorm: div(x.gn, int64(updates)), GradNormMax: x.gnMax,
			ClipFrac: div(x.clip, x.seen), ApproxKL: div(x.kl, x.seen), RefKL: div(x.refKL, x.seen),
			Entropy: div(x.ent, x.seen), MeanAbsAdv: div(x.absAdv, x.seen), RatioMax: x.ratioMax,
			ClipFracLow: ptr(div(x.clipLow, x.seen)), ClipFracHigh: ptr(div(x.clipHigh, x.seen)), DualClipFrac: ptr(div(x.dual, x.seen)),
		})
		if rolloutIS {
			r := &out[len(out)-1]
			r.RolloutISMean, r.RolloutISMax, r.RolloutISCapped = ptr(div(x.isSum, x.isUnits)), ptr(x.isMax), ptr(div(float64(x.isCapped), x.isUnits))
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// addRowStats sets the metrics' statistics of the iteration's rows of model id: per agent and
// for the model ("*"), the share of rows whose advantage group had zero score spread and the
// response lengths' mean and max.
func addRowStats(out []MetricsRow, id string, rows []shards.Row, advs []shards.AdvantageRow) {
	type stat struct{ rows, zero, tokens, max int64 }
	by := map[string]*stat{"*": {}}
	for i := range rows {
		r := &rows[i]
		if r.Model != id || len(r.ResponseIDs) == 0 {
			continue
		}
		if by[r.Agent] == nil {
			by[r.Agent] = &stat{}
		}
		for _, s := range []*stat{by[r.Agent], by["*"]} {
			s.rows++
			s.tokens += int64(len(r.ResponseIDs))
			s.max = max(s.max, int64(len(r.ResponseIDs)))
			if advs[i].BaselineStd == 0 {
				s.zero++
			}
		}
	}
	for i := range out {
		s := by[out[i].Agent]
		if s == nil {
			s = &stat{}
		}
		out[i].ZeroStdShare = ptr(div(float64(s.zero), s.rows))
		out[i].ResponseLenMean = ptr(div(float64(s.tokens), s.rows))
		out[i].ResponseLenMax = ptr(s.max)
	}
}

// checkFirstUpdate is the invariants build's check of the first mini-batch of an iteration:
// its old log-probs were scored with the very weights it is trained from, by an engine whose
// results do not depend on the batch's composition, so every token's ratio must be exactly 1.
func checkFirstUpdate(st Stats) error {
	for _, a := range stages.SortedKeys(st.Agents) {
		as := st.Agents[a]
		if as.Tokens > 0 && (as.MaxRatio != 1 || as.SumLogRatioSq != 0 || as.SumRatio != float64(as.Tokens)) {
			return fmt.Errorf("%w: first mini-batch of agent %s: ratio max %v, sum %v over %d tokens, Σ log² %v; want exactly 1 per token",
				invariants.ErrViolated, a, as.MaxRatio, as.SumRatio, as.Tokens, as.SumLogRatioSq)
		}
	}
	return nil
}
