// Package normalize is the normalize stage: it reads the key and score columns of an
// iteration's committed rollout parts, computes the requested advantage estimators in one pass
// per part (package estimators), and commits one narrow sidecar per part and estimator plus per-agent
// diagnostics (docs/design.md, "Shard schemas" and "Estimators").
//
// Parts are processed concurrently, on up to GOMAXPROCS goroutines, and their results merged
// in part order: memory is bounded by that many parts (their columns live in huge-page arenas,
// internal/hugemem, reused from part to part), and outputs do not depend on the concurrency.
// Outputs are byte-identical across reruns; an estimator whose folder is already committed is
// skipped.
package normalize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/internal/hugemem"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/storage"
)

// Options select what to normalize.
type Options struct {
	Iteration int
	// Estimators are estimator names (estimators.ParseSpec); default: the config's
	// normalize.estimators.
	Estimators []string
	// Shard selects the parts this worker normalizes (zero value: all of them). The worker that
	// finds every part's sidecar written commits the estimator's folders.
	Shard jobs.Shard
}

// DiagnosticsRow is the persisted schema shards.DiagnosticsRow, named here for this stage's callers.
type DiagnosticsRow = shards.DiagnosticsRow

// Result summarises a normalize run.
type Result struct {
	Rows        int64
	Estimators  []string // canonical names, in request order
	Skipped     []string // already committed
	Pending     []string // not committed yet: other shards still have parts to write
	Diagnostics map[string][]DiagnosticsRow
}

// ParseSpecs resolves estimator names with the configured ε (estimators.Resolve: a name that
// spells ε out, e.g. drmas_eps1e-6, keeps its own), rejecting duplicates.
func ParseSpecs(names []string, eps float64) ([]estimators.Spec, error) {
	var specs []estimators.Spec
	var errs []error
	seen := map[string]string{} // canonical name → the name it was first requested as
	for _, n := range names {
		s, err := estimators.Resolve(n, eps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, ok := seen[s.Name()]; ok {
			errs = append(errs, fmt.Errorf("estimator %s requested twice (as %q and %q)", s.Name(), first, n))
			continue
		}
		seen[s.Name()] = n
		specs = append(specs, s)
	}
	if len(specs) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no estimator requested"))
	}
	return specs, errors.Join(errs...)
}

// Run normalizes this worker's parts of one iteration and, for each estimator whose sidecars
// are then all written, commits the diagnostics folder and the advantage folder (in that order:
// a committed advantage folder implies committed diagnostics). Each finished part leaves a
// receipt carrying its per-agent partial statistics, which the finalize merges in part order,
// so the outputs are byte-identical whether one process or many shards did the work. Its
// errors name the stage once ("normalize iter N: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	res, err := runStage(ctx, env, o)
	if err != nil {
		return nil, stages.Fail(ctx, stages.IterName("normalize", o.Iteration), err)
	}
	return res, nil
}

// runStage is the protocol: read the committed rollout, skip the estimators already committed
// from it, write this worker's missing sidecars (each part's receipt after its files), then
// commit each estimator's folders once every part's receipt is there.
func runStage(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	specs, err := resolve(env, &o)
	if err != nil {
		return nil, err
	}
	w, err := readRollout(ctx, env, o.Iteration)
	if err != nil {
		return nil, err
	}
	res, err := w.plan(ctx, specs)
	if err != nil || len(w.todo) == 0 {
		return res, err
	}
	parts, rows, err := w.pendingParts(ctx, o.Shard)
	if err != nil {
		return nil, err
	}
	elapsed, err := w.writeParts(ctx, parts, rows)
	if err != nil {
		return nil, err
	}
	committed, pending, err := w.finalize(ctx, res)
	if err != nil {
		return nil, err
	}
	res.Pending = pending
	what := fmt.Sprintf("%d of %d parts by shard %s", len(parts), len(w.in.Files), o.Shard)
	if len(committed) > 0 {
		what += ", committed " + strings.Join(committed, ",")
	}
	if len(pending) > 0 {
		what += ", waiting for the other shards: " + strings.Join(pending, ",")
	}
	env.Logf("normalize iter %d: %s; %d rows in %s (%.1f M rows/s)", w.iter, what, rows,
		elapsed.Round(1e6), float64(rows)/max(elapsed.Seconds(), 1e-9)/1e6)
	return res, nil
}

// resolve fills o's defaults (the whole iteration, normalize.estimators) and resolves the
// estimators.
func resolve(env *stages.Env, o *Options) ([]estimators.Spec, error) {
	if o.Shard == (jobs.Shard{}) {
		o.Shard = jobs.Whole
	}
	if err := o.Shard.Validate(); err != nil {
		return nil, err
	}
	names := o.Estimators
	if len(names) == 0 {
		names = env.Config.Normalize.Estimators
	}
	return ParseSpecs(names, env.Config.Normalize.Eps)
}

// stageRun is one normalize of one iteration: its committed input and, once planned, the
// estimators to compute with what their folders will commit.
type stageRun struct {
	env   *stages.Env
	b     storage.Bucket
	run   string
	iter  int
	inDir string
	in    *commit.Manifest
	inSHA string

	todo      []estimators.Spec
	advDirs   []string
	inputs    []commit.Input
	manifests []*commit.Manifest // what each advantage folder will commit, less its files
	writers   []string           // their Writers, which mark the receipts
}

// readRollout reads the iteration's committed rollout manifest.
func readRollout(ctx context.Context, env *stages.Env, iter int) (*stageRun, error) {
	w := &stageRun{env: env, b: env.Bucket, run: env.Config.Run, iter: iter}
	w.inDir = layout.RolloutDir(w.run, iter)
	var err error
	w.in, w.inSHA, err = commit.Read(ctx, w.b, w.inDir)
	if errors.Is(err, commit.ErrNotCommitted) {
		return nil, fmt.Errorf("rollout is not committed (%s): %w", stages.RolloutFirst(ctx, env, iter, ""), err)
	}
	if err != nil { // cancelled, I/O, permissions, a corrupt manifest: commit.Read names the folder
		return nil, err
	}
	return w, nil
}

// plan skips the estimators whose advantage folder is committed from this rollout, refuses one
// committed from another, and prepares the manifests of the rest (w.todo). When none is left it
// logs so and returns the result.
func (w *stageRun) plan(ctx context.Context, specs []estimators.Spec) (*Result, error) {
	res := &Result{Rows: w.in.Rows, Diagnostics: map[string][]DiagnosticsRow{}}
	for _, s := range specs {
		res.Estimators = append(res.Estimators, s.Name())
		advDir := layout.AdvantageDir(w.run, w.iter, s.Name())
		old, _, err := commit.Read(ctx, w.b, advDir)
		if err != nil && !errors.Is(err, commit.ErrNotCommitted) {
			return nil, err
		}
		if err == nil {
			if !old.ComputedFrom(w.inDir, w.inSHA) {
				return nil, &stages.StaleAdvantagesError{Dir: advDir, Diagnostics: layout.DiagnosticsDir(w.run, w.iter, s.Name()), Iter: w.iter, Estimator: s.Name(),
					What: fmt.Sprintf("%s/ was committed from another rollout than the one now in %s/ (the rollout was replaced since), so its advantages describe other rows", advDir, w.inDir)}
			}
			// A worker killed between the commit and the receipts' removal leaves them behind
			// (harmless: a failed removal is a warning).
			if err := w.env.Leftover(stages.IterName("normalize", w.iter), commit.CleanReceipts(ctx, w.b, advDir)); err != nil {
				return nil, err
			}
			res.Skipped = append(res.Skipped, s.Name())
			continue
		}
		w.todo = append(w.todo, s)
	}
	if len(w.todo) == 0 {
		w.env.Logf("normalize iter %d: %s already committed", w.iter, strings.Join(res.Skipped, ","))
		return res, nil
	}
	// Parts computed from another input have another Writer, so they are never committed with
	// these.
	w.inputs = []commit.Input{{Dir: w.inDir, ManifestSHA256: w.inSHA}}
	w.advDirs = make([]string, len(w.todo))
	w.manifests = make([]*commit.Manifest, len(w.todo))
	w.writers = make([]string, len(w.todo))
	for ei, s := range w.todo {
		w.advDirs[ei] = layout.AdvantageDir(w.run, w.iter, s.Name())
		w.manifests[ei] = &commit.Manifest{
			Kind: "advantage", SchemaVersion: shards.SchemaVersion, Run: w.run, Iteration: &w.iter,
			Inputs: w.inputs, Params: map[string]string{"estimator": s.Name(), "eps": strconv.FormatFloat(s.Eps, 'g', -1, 64)},
		}
		w.writers[ei] = commit.Writer(w.manifests[ei])
	}
	return res, nil
}

// pendingParts lists this worker's parts that still lack a sidecar of some estimator (a
// receipt marks one), and their rows.
func (w *stageRun) pendingParts(ctx context.Context, shard jobs.Shard) (parts []int, rows int64, err error) {
	for _, p := range shard.Parts(len(w.in.Files)) {
		for ei, dir := range w.advDirs {
			if _, ok, err := commit.HavePart(ctx, w.b, dir, w.in.Files[p].Name, w.writers[ei]); err != nil {
				return nil, 0, err
			} else if !ok {
				parts = append(parts, p)
				rows += w.in.Files[p].Rows
				break
			}
		}
	}
	return parts, rows, nil
}

// writeParts computes and writes every estimator's sidecar of each part, then its receipts
// (in part order), and returns the time it took.
func (w *stageRun) writeParts(ctx context.Context, parts []int, rows int64) (time.Duration, error) {
	bar := progress.New(w.env.Progress, rows, fmt.Sprintf("normalize iter %d", w.iter), "rows")
	err := forEachPart(ctx, len(parts), len(w.todo), func(ctx context.Context, i int, sl *slot, p *partOut) error {
		return w.computePart(ctx, w.in.Files[parts[i]], sl, p)
	}, func(ctx context.Context, i int, p *partOut) error {
		f := w.in.Files[parts[i]]
		for ei := range w.todo {
			cf, err := commit.PutFile(ctx, w.b, w.advDirs[ei], f.Name, p.data[ei], int64(p.rows))
			if err != nil {
				return err
			}
			p.files[ei] = cf
		}
		return nil
	}, func(i int, p *partOut) error {
		// The part's receipts, written after its sidecars, in part order.
		for ei := range w.todo {
			if err := commit.PutReceipt(ctx, w.b, w.advDirs[ei], commit.Receipt{File: p.files[ei], Writer: w.writers[ei], Extra: p.extras[ei]}); err != nil {
				return err
			}
		}
		bar.Add(p.rows)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return bar.Finish(), nil
}

// computePart is the CPU work of one part: its keys, every estimator's advantages and
// diagnostics in one pass over the groups, the encoded sidecars and the receipts' partial
// statistics, into p.
func (w *stageRun) computePart(ctx context.Context, f commit.File, sl *slot, p *partOut) error {
	needTraj := false
	for _, s := range w.todo {
		needTraj = needTraj || s.UsesTraj()
	}
	sl.kr.NoSample = !needTraj
	cols, keys, err := readPart(ctx, w.env, w.inDir, f, sl)
	if err != nil {
		return err
	}
	// The encoder reads per-pair statistics once per pair and row group: the kernel need not
	// write them on the other rows.
	for ei, s := range w.todo {
		sl.outs[ei].SparseStats = 0
		if s.PerPair() {
			sl.outs[ei].SparseStats = shards.RowGroupRows
		}
	}
	for _, out := range sl.outs {
		sl.presize(out, keys.Len())
	}
	diags, err := estimators.ComputeWithDiagnostics(ctx, w.todo, cols, sl.outs, sl.diags)
	if err != nil {
		// The kernel names the row by its index and codes; name its row_id, uid and agent.
		var oe *estimators.OverflowError
		if errors.As(err, &oe) && oe.Row >= 0 && oe.Row < keys.Len() {
			r := oe.Row
			err = fmt.Errorf("row_id %d (uid %s, agent %s): %w", keys.RowID[r], excerpt.Quote(keys.UIDs[keys.Group[r]]), excerpt.Quote(keys.Agents[keys.Agent[r]]), err)
		}
		return fmt.Errorf("%s: %w", path.Join(w.inDir, f.Name), err)
	}
	sl.diags = diags
	p.rows = keys.Len()
	for ei := range w.todo {
		// Each sidecar is encoded into a buffer the part then owns until it is written.
		sl.enc.out = p.data[ei]
		data, err := sl.enc.encode(keys, sl.outs[ei], w.todo[ei].PerPair())
		sl.enc.out = nil
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		p.data[ei] = data
		// The part's per-agent partial statistics (a function of the part alone), for its
		// receipt.
		var part diagAcc
		part.add(keys, cols, diags, sl.outs[ei])
		if err := part.finite(); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		extra, err := json.Marshal(part.export())
		if err != nil {
			return fmt.Errorf("encode part statistics: %w", err)
		}
		p.extras[ei] = extra
	}
	return nil
}

// finalize commits, for each estimator whose parts all have receipts, the diagnostics folder
// (merged from the receipts in part order) and then the advantage folder. It returns the
// estimators committed and those still waiting for other shards.
func (w *stageRun) finalize(ctx context.Context, res *Result) (committed, pending []string, err error) {
	partNames := make([]string, len(w.in.Files))
	for i, f := range w.in.Files {
		partNames[i] = f.Name
	}
	for ei, s := range w.todo {
		done, _, err := commit.Finalize(ctx, w.b, w.advDirs[ei], partNames, w.manifests[ei], func(recs []commit.Receipt) ([]commit.File, error) {
			rows, err := w.commitDiagnostics(ctx, s, w.manifests[ei].Params, recs)
			if err != nil {
				return nil, err
			}
			res.Diagnostics[s.Name()] = rows
			return nil, nil
		})
		if err := w.env.Leftover(stages.IterName("normalize", w.iter), err); err != nil {
			return nil, nil, err
		}
		if done {
			committed = append(committed, s.Name())
		} else {
			pending = append(pending, s.Name())
		}
	}
	return committed, pending, nil
}

// commitDiagnostics merges the parts' statistics from their receipts and commits the
// estimator's diagnostics folder.
func (w *stageRun) commitDiagnostics(ctx context.Context, s estimators.Spec, params map[string]string, recs []commit.Receipt) ([]DiagnosticsRow, error) {
	var acc diagAcc
	for _, r := range recs {
		var part diagExport
		if err := commit.DecodeExtra(r, &part); err != nil {
			return nil, err
		}
		acc.merge(part)
	}
	if err := acc.finite(); err != nil {
		return nil, err
	}
	rows := acc.rows(int32(w.iter), s.Name())
	data, err := shards.EncodeTable(rows)
	if err != nil {
		return nil, fmt.Errorf("encode diagnostics: %w", err)
	}
	diagDir := layout.DiagnosticsDir(w.run, w.iter, s.Name())
	df, err := commit.PutFile(ctx, w.b, diagDir, "agents.parquet", data, int64(len(rows)))
	if err != nil {
		return nil, err
	}
	if _, err := commit.Commit(ctx, w.b, diagDir, &commit.Manifest{
		Kind: "diagnostics", SchemaVersion: shards.SchemaVersion, Run: w.run, Iteration: &w.iter,
		Rows: int64(len(rows)), Files: []commit.File{df}, Inputs: w.inputs, Params: params,
	}); err != nil {
		return nil, err
	}
	return rows, nil
}

// slot is the working memory of a part's CPU work: its decoded keys, the estimators' results
// and the sidecar encoder's scratch space, reused from part to part.
type slot struct {
	kr     shards.KeyReader
	colBuf estimators.Columns
	diags  []estimators.AgentDiagnostics
	outs   []*estimators.Result
	enc    sidecarEncoder
	// arena holds the slot's per-row columns (keys, trajectories, results) and the encoded
	// sidecars on huge pages; forEachPart frees it when every part is done.
	arena hugemem.Arena
}

func newSlot(nEst int) *slot {
	sl := &slot{outs: make([]*estimators.Result, nEst)}
	for i := range sl.outs {
		sl.outs[i] = &estimators.Result{}
	}
	sl.kr.Arena = &sl.arena
	sl.enc.arena = &sl.arena
	return sl
}

// presize gives r's columns room for n rows from the slot's arena (ComputeMany then reuses
// them). Compact statistics touch only the pages of their few entries.
func (sl *slot) presize(r *estimators.Result, n int) {
	r.Advantage = hugemem.Grow(&sl.arena, r.Advantage[:0], n)
	r.PairRow = hugemem.Grow(&sl.arena, r.PairRow[:0], n)
	r.BaselineMean = hugemem.Grow(&sl.arena, r.BaselineMean[:0], n)
	r.BaselineStd = hugemem.Grow(&sl.arena, r.BaselineStd[:0], n)
	r.GroupSize = hugemem.Grow(&sl.arena, r.GroupSize[:0], n)
}

// partOut is what a part hands from its CPU work to its writes and its merge: one encoded
// sidecar, receipt payload and written file per estimator.
type partOut struct {
	rows   int
	data   [][]byte // sidecar bytes (buffers reused by later parts once written)
	extras [][]byte
	files  []commit.File
}

// forEachPart runs each part i of 0..n-1 in three steps: compute(i) on a slot, holding one of
// GOMAXPROCS CPU tokens; then write(i), holding neither (its I/O overlaps the next part's
// computing); then merge(i), on the calling goroutine, strictly in part order. Parts start in
// part order. Memory is bounded whatever n is: GOMAXPROCS slots (the per-row columns) and one
// part more than that holding encoded sidecars (compute's outputs, until written). The first
// error (in part order) cancels the others' ctx; it is returned once every started part has
// stopped.
func forEachPart(ctx context.Context, n, nEst int,
	compute func(ctx context.Context, i int, sl *slot, p *partOut) error,
	write func(ctx context.Context, i int, p *partOut) error,
	merge func(i int, p *partOut) error) error {
	workers := max(1, min(n, runtime.GOMAXPROCS(0)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan *slot, workers)
	all := make([]*slot, workers)
	for i := range all {
		all[i] = newSlot(nEst)
		free <- all[i]
	}
	// Output sets: a part takes one before computing and gives it back once written, so at
	// most workers+1 parts hold encoded sidecars (one writing while every slot computes).
	outs := make(chan *partOut, min(n, workers+1))
	for range cap(outs) {
		outs <- &partOut{data: make([][]byte, nEst), extras: make([][]byte, nEst), files: make([]commit.File, nEst)}
	}
	defer func() { // after wg.Wait (deferred below): no part uses a slot or a buffer any more
		for _, sl := range all {
			sl.arena.Free()
		}
	}()
	type done struct {
		p   *partOut
		err error
	}
	results := make([]chan done, n)
	for i := range results {
		results[i] = make(chan done, 1)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { // dispatcher: starts part i, in part order, when an output set and a slot are free
		defer wg.Done()
		for i := 0; i < n; i++ {
			var p *partOut
			select {
			case p = <-outs:
			case <-ctx.Done():
				return
			}
			var sl *slot
			select {
			case sl = <-free:
			case <-ctx.Done():
				results[i] <- done{p, ctx.Err()}
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := compute(ctx, i, sl, p)
				free <- sl // the slot's columns are not needed by the write
				if err == nil {
					err = write(ctx, i, p)
				}
				results[i] <- done{p, err}
			}()
		}
	}()
	for i := 0; i < n; i++ {
		var d done
		select {
		case d = <-results[i]:
		case <-ctx.Done():
			// Only reached after a cancel from outside: the dispatcher may not start part i.
			return ctx.Err()
		}
		if d.err != nil {
			cancel()
			return d.err
		}
		if err := merge(i, d.p); err != nil {
			cancel()
			return err
		}
		outs <- d.p
	}
	return nil
}

// readPart fetches the key columns of one committed part (only their column chunks: the token
// columns are never downloaded) after checking its size against the manifest, and decodes them
// into the slot's reusable buffers (sl.keys, sl.cols stay valid until the slot's next part).
func readPart(ctx context.Context, env *stages.Env, dir string, f commit.File, sl *slot) (*estimators.Columns, *shards.Keys, error) {
	name := path.Join(dir, f.Name)
	// A committed part that is gone or of another size was damaged in the store since.
	fix := fmt.Sprintf("restore it, or delete %s/ and roll the iteration out again", dir)
	attr, err := env.Bucket.Stat(ctx, name)
	if storage.IsNotFound(err) {
		return nil, nil, fmt.Errorf("%s is listed in the committed rollout but missing from the store: %s: %w", name, fix, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if attr.Size != f.Bytes {
		return nil, nil, fmt.Errorf("%s has %d bytes, its manifest says %d (damaged in the store): %s", name, attr.Size, f.Bytes, fix)
	}
	keys, err := sl.kr.Read(ctx, env.Bucket, name, f.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if int64(keys.Len()) != f.Rows {
		return nil, nil, fmt.Errorf("%s has %d rows, its manifest says %d (damaged in the store): %s", name, keys.Len(), f.Rows, fix)
	}
	// No separate cols.Validate pass: ReadKeys yields dense codes, contiguous groups and finite
	// scores, and estimators.ComputeMany checks the same properties as it goes (returning
	// Validate's *ValidationError, naming the part, should they ever fail).
	if sl.kr.NoSample {
		// No estimator needs trajectories (estimators.Spec.UsesTraj).
		sl.colBuf.Traj = nil
	} else {
		if err := checkSampleOrder(keys); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		sl.colBuf.Traj = trajCodes(hugemem.Grow(&sl.arena, sl.colBuf.Traj[:0], keys.Len()), keys)
	}
	sl.colBuf.Group, sl.colBuf.Agent, sl.colBuf.Score, sl.colBuf.NumAgents = keys.Group, keys.Agent, keys.Score, len(keys.Agents)
	return &sl.colBuf, keys, nil
}

// ColumnsOf turns decoded keys into kernel columns. Trajectories are (uid, sample) runs:
// rows are sorted by (uid, sample, step, agent), so a new trajectory starts wherever the group
// or the sample changes.
func ColumnsOf(k *shards.Keys) *estimators.Columns {
	return &estimators.Columns{Group: k.Group, Traj: trajCodes(nil, k), Agent: k.Agent, Score: k.Score, NumAgents: len(k.Agents)}
}

// checkSampleOrder reports the first row whose sample is below the previous row's in the same
// uid: a trajectory is a run of rows with one (uid, sample), so a part whose rows of a uid are
// not sorted by sample would split trajectories and give grpo wrong advantages. drmas's
// writers and importer never write such a part (shards.CheckPart); another tool might.
func checkSampleOrder(k *shards.Keys) error {
	for i := 1; i < k.Len(); i++ {
		if k.Group[i] == k.Group[i-1] && k.Sample[i] < k.Sample[i-1] {
			return fmt.Errorf("row %d (row_id %d, uid %s): sample %d after sample %d: the rows of a uid must be sorted by (sample, step), so that each trajectory's rows are contiguous",
				i, k.RowID[i], excerpt.Quote(k.UIDs[k.Group[i]]), k.Sample[i], k.Sample[i-1])
		}
	}
	return nil
}

// trajCodes returns the trajectory code of each row (see ColumnsOf), in traj's memory when it
// is large enough.
func trajCodes(traj []int32, k *shards.Keys) []int32 {
	n := k.Len()
	if cap(traj) < n {
		traj = make([]int32, n)
	}
	traj = traj[:n]
	grp, smp := k.Group[:n], k.Sample[:n]
	t := int32(-1)
	pg, ps := int32(-1), int32(0)
	for i := range traj {
		g, s := grp[i], smp[i]
		if i == 0 || g != pg || s != ps {
			t++
		}
		pg, ps = g, s
		traj[i] = t
	}
	return traj
}

// diagAcc merges per-part diagnostics and advantage statistics per agent name, in a fixed
// order (parts in order, agents sorted by name at the end).
type diagAcc struct {
	byAgent map[string]*agentAcc
	order   []string
}

type agentAcc struct {
	d                        estimators.AgentDiagnostics
	sumMuK, sumSigK, sumMu   float64
	sumSig, sumZero, sumInfl float64
	advN                     int64
	advSum, advAbsSum, advM2 float64 // advM2: Σ (advantage − mean)², for adv_std
}

// addAdv merges the advantage statistics of n more rows (their sum, sum of absolute values and
// sum of squared deviations from their own mean) with Chan et al.'s pairwise update, so that
// adv_std stays accurate when the mean is large next to the spread (Σx²/n − mean² would cancel).
func (x *agentAcc) addAdv(n int64, sum, absSum, m2 float64) {
	if n == 0 {
		return
	}
	if x.advN > 0 {
		d := sum/float64(n) - x.advSum/float64(x.advN)
		m2 += float64(d * d * (float64(x.advN) * float64(n) / float64(x.advN+n)))
	}
	x.advN += n
	x.advSum += sum
	x.advAbsSum += absSum
	x.advM2 += m2
}

func (a *diagAcc) add(k *shards.Keys, cols *estimators.Columns, diags []estimators.AgentDiagnostics, r *estimators.Result) {
	if a.byAgent == nil {
		a.byAgent = map[string]*agentAcc{}
	}
	local := make([]*agentAcc, len(k.Agents))
	for code, name := range k.Agents {
		x, ok := a.byAgent[name]
		if !ok {
			x = &agentAcc{}
			a.byAgent[name] = x
			a.order = append(a.order, name)
		}
		local[code] = x
		if code < len(diags) {
			d := diags[code]
			g := float64(d.Groups)
			x.d.Groups += d.Groups
			x.d.Rows += d.Rows
			x.d.SingletonGroups += d.SingletonGroups
			x.d.InflationGroups += d.InflationGroups
			x.d.ZeroSigmaGroups += d.ZeroSigmaGroups
			x.d.InflationMax = math.Max(x.d.InflationMax, d.InflationMax)
			x.sumMuK += float64(d.MeanMuK * g)
			x.sumSigK += float64(d.MeanSigmaK * g)
			x.sumMu += float64(d.MeanMu * g)
			x.sumSig += float64(d.MeanSigma * g)
			x.sumZero += float64(d.ZeroSigmaKShare * g)
			x.sumInfl += float64(d.InflationMean * float64(d.InflationGroups))
		}
	}
	// The part's advantage statistics per agent code, two-pass (sums, then squared deviations
	// from the part's mean), then merged into the agents' accumulators.
	nc := len(k.Agents)
	cnt := make([]int64, nc)
	sum, absSum, m2 := make([]float64, nc), make([]float64, nc), make([]float64, nc)
	for i, code := range cols.Agent {
		v := float64(r.Advantage[i])
		cnt[code]++
		sum[code] += v
		absSum[code] += math.Abs(v)
	}
	for i, code := range cols.Agent {
		d := float64(r.Advantage[i]) - sum[code]/float64(cnt[code])
		m2[code] += float64(d * d)
	}
	for code, x := range local {
		x.addAdv(cnt[code], sum[code], absSum[code], m2[code])
	}
}

// finite reports the first agent (in name order) whose diagnostic sums over its groups are not
// finite: each group's statistics are (the estimators check them), but scores near ±1.8e308 can
// still overflow a sum over many groups.
func (a *diagAcc) finite() error {
	names := slices.Sorted(maps.Keys(a.byAgent))
	for _, name := range names {
		x := a.byAgent[name]
		for _, v := range []struct {
			what string
			sum  float64
		}{{"μ_k", x.sumMuK}, {"σ_k", x.sumSigK}, {"μ", x.sumMu}, {"σ", x.sumSig}, {"the inflation", x.sumInfl},
			{"the advantages", x.advSum}, {"|advantage|", x.advAbsSum}, {"the advantages' squared deviations", x.advM2}} {
			if math.IsInf(v.sum, 0) || math.IsNaN(v.sum) {
				return fmt.Errorf("diagnostics of agent %s: the sum of %s over its groups is not finite in float64: the scores are too large, scale them down", excerpt.Quote(name), v.what)
			}
		}
	}
	return nil
}

// diagExport is a diagAcc as JSON (a part receipt's payload). encoding/json writes float64s in
// their shortest exact form, so merging exported partials is exact.
type diagExport map[string]agentExport

type agentExport struct {
	D                        estimators.AgentDiagnostics
	SumMuK, SumSigK, SumMu   float64
	SumSig, SumZero, SumInfl float64
	AdvN                     int64
	AdvSum, AdvAbsSum, AdvM2 float64
}

func (a *diagAcc) export() diagExport {
	out := diagExport{}
	for name, x := range a.byAgent {
		out[name] = agentExport{D: x.d, SumMuK: x.sumMuK, SumSigK: x.sumSigK, SumMu: x.sumMu, SumSig: x.sumSig,
			SumZero: x.sumZero, SumInfl: x.sumInfl, AdvN: x.advN, AdvSum: x.advSum, AdvAbsSum: x.advAbsSum, AdvM2: x.advM2}
	}
	return out
}

// merge adds a part's partial statistics; callers merge parts in part order (and agents in
// name order, below), so sums are reduced in a fixed order.
func (a *diagAcc) merge(p diagExport) {
	if a.byAgent == nil {
		a.byAgent = map[string]*agentAcc{}
	}
	names := make([]string, 0, len(p))
	for name := range p {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := p[name]
		x, ok := a.byAgent[name]
		if !ok {
			x = &agentAcc{}
			a.byAgent[name] = x
			a.order = append(a.order, name)
		}
		x.d.Groups += e.D.Groups
		x.d.Rows += e.D.Rows
		x.d.SingletonGroups += e.D.SingletonGroups
		x.d.InflationGroups += e.D.InflationGroups
		x.d.ZeroSigmaGroups += e.D.ZeroSigmaGroups
		x.d.InflationMax = math.Max(x.d.InflationMax, e.D.InflationMax)
		x.sumMuK += e.SumMuK
		x.sumSigK += e.SumSigK
		x.sumMu += e.SumMu
		x.sumSig += e.SumSig
		x.sumZero += e.SumZero
		x.sumInfl += e.SumInfl
		x.addAdv(e.AdvN, e.AdvSum, e.AdvAbsSum, e.AdvM2)
	}
}

func (a *diagAcc) rows(iter int32, est string) []DiagnosticsRow {
	names := append([]string(nil), a.order...)
	sort.Strings(names)
	out := make([]DiagnosticsRow, 0, len(names))
	div := func(x float64, n int64) float64 {
		if n == 0 {
			return 0
		}
		return x / float64(n)
	}
	for _, name := range names {
		x := a.byAgent[name]
		mean := div(x.advSum, x.advN)
		out = append(out, DiagnosticsRow{
			Iteration: iter, Estimator: est, Agent: name,
			Rows: x.d.Rows, Groups: x.d.Groups, SingletonGroups: x.d.SingletonGroups,
			MuK: div(x.sumMuK, x.d.Groups), SigmaK: div(x.sumSigK, x.d.Groups),
			Mu: div(x.sumMu, x.d.Groups), Sigma: div(x.sumSig, x.d.Groups),
			ZeroSigmaKShare: div(x.sumZero, x.d.Groups),
			InflationMean:   div(x.sumInfl, x.d.InflationGroups), InflationMax: x.d.InflationMax,
			InflationGroups: x.d.InflationGroups, ZeroSigmaGroups: x.d.ZeroSigmaGroups,
			AdvMean: mean, AdvAbsMean: div(x.advAbsSum, x.advN), AdvStd: math.Sqrt(div(x.advM2, x.advN)),
		})
	}
	return out
}
