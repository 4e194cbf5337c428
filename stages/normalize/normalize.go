// Package normalize is the normalize stage: it reads the key and score columns of an
// iteration's committed rollout parts, computes the requested advantage estimators in one pass
// per part (kernels), and commits one narrow sidecar per part and estimator plus per-agent
// diagnostics (DESIGN §2, §3).
//
// Memory is bounded by one part: parts are processed one at a time. Outputs are byte-identical
// across reruns; an estimator whose folder is already committed is skipped.
package normalize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/kernels"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
)

// Options select what to normalize.
type Options struct {
	Iteration int
	// Estimators are estimator names (kernels.ParseSpec); default: the config's
	// normalize.estimators.
	Estimators []string
}

// DiagnosticsRow is one row of diagnostics/est=<name>/agents.parquet: the Lemma 4.2 statistics of
// one agent over the iteration's groups, and the estimator's advantage statistics for it.
type DiagnosticsRow struct {
	Iteration       int32   `parquet:"iteration"`
	Estimator       string  `parquet:"estimator,dict"`
	Agent           string  `parquet:"agent,dict"`
	Rows            int64   `parquet:"rows"`
	Groups          int64   `parquet:"groups"`
	SingletonGroups int64   `parquet:"singleton_groups"`
	MuK             float64 `parquet:"mu_k"`
	SigmaK          float64 `parquet:"sigma_k"`
	Mu              float64 `parquet:"mu"`
	Sigma           float64 `parquet:"sigma"`
	ZeroSigmaKShare float64 `parquet:"zero_sigma_k_share"`
	InflationMean   float64 `parquet:"inflation_mean"`
	InflationMax    float64 `parquet:"inflation_max"`
	InflationGroups int64   `parquet:"inflation_groups"`
	ZeroSigmaGroups int64   `parquet:"zero_sigma_groups"`
	AdvMean         float64 `parquet:"adv_mean"`
	AdvAbsMean      float64 `parquet:"adv_abs_mean"`
	AdvStd          float64 `parquet:"adv_std"`
}

// Result summarises a normalize run.
type Result struct {
	Rows        int64
	Estimators  []string // canonical names, in request order
	Skipped     []string // already committed
	Diagnostics map[string][]DiagnosticsRow
}

// ParseSpecs resolves estimator names with the configured ε, rejecting duplicates.
func ParseSpecs(names []string, eps float64) ([]kernels.Spec, error) {
	var specs []kernels.Spec
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		s, err := kernels.ParseSpec(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if eps > 0 && s.Eps == kernels.DefaultEps {
			s.Eps = eps
		}
		s = s.Canonical()
		if seen[s.Name()] {
			errs = append(errs, fmt.Errorf("estimator %s requested twice", s.Name()))
			continue
		}
		seen[s.Name()] = true
		specs = append(specs, s)
	}
	if len(specs) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no estimator requested"))
	}
	return specs, errors.Join(errs...)
}

// Run normalizes one iteration.
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	cfg := env.Config
	names := o.Estimators
	if len(names) == 0 {
		names = cfg.Normalize.Estimators
	}
	specs, err := ParseSpecs(names, cfg.Normalize.Eps)
	if err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	b := env.Bucket
	inDir := commit.RolloutDir(cfg.Run, o.Iteration)
	in, inSHA, err := commit.Read(ctx, b, inDir)
	if err != nil {
		return nil, fmt.Errorf("normalize iteration %d: rollout is not committed (run `drmas run-stage rollout --iter %d` first): %w", o.Iteration, o.Iteration, err)
	}
	res := &Result{Rows: in.Rows, Diagnostics: map[string][]DiagnosticsRow{}}
	var todo []kernels.Spec
	for _, s := range specs {
		res.Estimators = append(res.Estimators, s.Name())
		done, err := commit.IsCommitted(ctx, b, commit.DiagnosticsDir(cfg.Run, o.Iteration, s.Name()))
		if err != nil {
			return nil, err
		}
		if done {
			res.Skipped = append(res.Skipped, s.Name())
			continue
		}
		todo = append(todo, s)
	}
	if len(todo) == 0 {
		env.Logf("normalize iter %d: %s already committed", o.Iteration, strings.Join(res.Skipped, ","))
		return res, nil
	}

	outs := make([]*kernels.Result, len(todo))
	files := make([][]commit.File, len(todo))
	for i := range outs {
		outs[i] = &kernels.Result{}
	}
	acc := make([]diagAcc, len(todo))
	bar := progress.New(env.Progress, in.Rows, fmt.Sprintf("normalize iter %d", o.Iteration), "rows")
	for _, f := range in.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cols, keys, err := readPart(ctx, env, inDir, f)
		if err != nil {
			return nil, err
		}
		if err := kernels.ComputeMany(ctx, todo, cols, outs); err != nil {
			return nil, fmt.Errorf("normalize %s: %w", path.Join(inDir, f.Name), err)
		}
		diags, err := kernels.Diagnose(cols)
		if err != nil {
			return nil, fmt.Errorf("normalize %s: %w", path.Join(inDir, f.Name), err)
		}
		for ei, s := range todo {
			data, err := encodeSidecar(keys, outs[ei])
			if err != nil {
				return nil, fmt.Errorf("normalize %s: %w", f.Name, err)
			}
			cf, err := commit.PutFile(ctx, b, commit.AdvantageDir(cfg.Run, o.Iteration, s.Name()), f.Name, data, int64(keys.Len()))
			if err != nil {
				return nil, err
			}
			files[ei] = append(files[ei], cf)
			acc[ei].add(keys, cols, diags, outs[ei])
		}
		bar.Add(keys.Len())
	}
	elapsed := bar.Finish()

	iter := o.Iteration
	for ei, s := range todo {
		params := map[string]string{"estimator": s.Name(), "eps": strconv.FormatFloat(s.Eps, 'g', -1, 64)}
		inputs := []commit.Input{{Dir: inDir, ManifestSHA256: inSHA}}
		advDir := commit.AdvantageDir(cfg.Run, iter, s.Name())
		advSHA, err := commit.Commit(ctx, b, advDir, &commit.Manifest{
			Kind: "advantage", SchemaVersion: shards.SchemaVersion, Run: cfg.Run, Iteration: &iter,
			Rows: in.Rows, Files: files[ei], Inputs: inputs, Params: params,
		})
		if err != nil {
			return nil, err
		}
		rows := acc[ei].rows(int32(iter), s.Name())
		data, err := shards.EncodeTable(rows)
		if err != nil {
			return nil, fmt.Errorf("encode diagnostics: %w", err)
		}
		diagDir := commit.DiagnosticsDir(cfg.Run, iter, s.Name())
		df, err := commit.PutFile(ctx, b, diagDir, "agents.parquet", data, int64(len(rows)))
		if err != nil {
			return nil, err
		}
		if _, err := commit.Commit(ctx, b, diagDir, &commit.Manifest{
			Kind: "diagnostics", SchemaVersion: shards.SchemaVersion, Run: cfg.Run, Iteration: &iter,
			Rows: int64(len(rows)), Files: []commit.File{df},
			Inputs: append(inputs, commit.Input{Dir: advDir, ManifestSHA256: advSHA}), Params: params,
		}); err != nil {
			return nil, err
		}
		res.Diagnostics[s.Name()] = rows
	}
	env.Logf("normalize iter %d: %d rows, %s in %s (%.1f M rows/s)", iter, in.Rows, strings.Join(namesOf(todo), ","),
		elapsed.Round(1e6), float64(in.Rows)/elapsed.Seconds()/1e6)
	return res, nil
}

// readPart fetches the key columns of one committed part (only their column chunks: the token
// columns are never downloaded) after checking its size against the manifest, and decodes them.
func readPart(ctx context.Context, env *stages.Env, dir string, f commit.File) (*kernels.Columns, *shards.Keys, error) {
	name := path.Join(dir, f.Name)
	attr, err := env.Bucket.Stat(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("normalize: %w", err)
	}
	if attr.Size != f.Bytes {
		return nil, nil, fmt.Errorf("normalize: %s has %d bytes, its manifest says %d", name, attr.Size, f.Bytes)
	}
	pf, err := shards.OpenColumns(ctx, env.Bucket, name, f.Bytes, shards.KeyColumns)
	if err != nil {
		return nil, nil, err
	}
	keys, err := shards.ReadKeys(ctx, pf, name)
	if err != nil {
		return nil, nil, err
	}
	cols := ColumnsOf(keys)
	if err := cols.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return cols, keys, nil
}

// ColumnsOf turns decoded keys into kernel columns. Trajectories are (uid, sample) runs:
// rows are sorted by (uid, sample, step, agent), so a new trajectory starts wherever the group
// or the sample changes.
func ColumnsOf(k *shards.Keys) *kernels.Columns {
	n := k.Len()
	traj := make([]int32, n)
	t := int32(-1)
	for i := 0; i < n; i++ {
		if i == 0 || k.Group[i] != k.Group[i-1] || k.Sample[i] != k.Sample[i-1] {
			t++
		}
		traj[i] = t
	}
	return &kernels.Columns{Group: k.Group, Traj: traj, Agent: k.Agent, Score: k.Score, NumAgents: len(k.Agents)}
}

func encodeSidecar(k *shards.Keys, r *kernels.Result) ([]byte, error) {
	rows := make([]shards.AdvantageRow, k.Len())
	for i := range rows {
		rows[i] = shards.AdvantageRow{
			RowID: k.RowID[i], UID: k.UIDs[k.Group[i]], Agent: k.Agents[k.Agent[i]],
			Advantage: r.Advantage[i], BaselineMean: r.BaselineMean[i], BaselineStd: r.BaselineStd[i], GroupSize: r.GroupSize[i],
		}
	}
	var buf bytes.Buffer
	if err := shards.WriteAdvantages(&buf, rows); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// diagAcc merges per-part diagnostics and advantage statistics per agent name, in a fixed
// order (parts in order, agents sorted by name at the end).
type diagAcc struct {
	byAgent map[string]*agentAcc
	order   []string
}

type agentAcc struct {
	d                        kernels.AgentDiagnostics
	sumMuK, sumSigK, sumMu   float64
	sumSig, sumZero, sumInfl float64
	advN                     int64
	advSum, advAbsSum, advSq float64
}

func (a *diagAcc) add(k *shards.Keys, cols *kernels.Columns, diags []kernels.AgentDiagnostics, r *kernels.Result) {
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
			x.sumMuK += d.MeanMuK * g
			x.sumSigK += d.MeanSigmaK * g
			x.sumMu += d.MeanMu * g
			x.sumSig += d.MeanSigma * g
			x.sumZero += d.ZeroSigmaKShare * g
			x.sumInfl += d.InflationMean * float64(d.InflationGroups)
		}
	}
	for i, code := range cols.Agent {
		x := local[code]
		v := float64(r.Advantage[i])
		x.advN++
		x.advSum += v
		x.advAbsSum += math.Abs(v)
		x.advSq += v * v
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
		variance := div(x.advSq, x.advN) - mean*mean
		out = append(out, DiagnosticsRow{
			Iteration: iter, Estimator: est, Agent: name,
			Rows: x.d.Rows, Groups: x.d.Groups, SingletonGroups: x.d.SingletonGroups,
			MuK: div(x.sumMuK, x.d.Groups), SigmaK: div(x.sumSigK, x.d.Groups),
			Mu: div(x.sumMu, x.d.Groups), Sigma: div(x.sumSig, x.d.Groups),
			ZeroSigmaKShare: div(x.sumZero, x.d.Groups),
			InflationMean:   div(x.sumInfl, x.d.InflationGroups), InflationMax: x.d.InflationMax,
			InflationGroups: x.d.InflationGroups, ZeroSigmaGroups: x.d.ZeroSigmaGroups,
			AdvMean: mean, AdvAbsMean: div(x.advAbsSum, x.advN), AdvStd: math.Sqrt(math.Max(variance, 0)),
		})
	}
	return out
}

func namesOf(specs []kernels.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name()
	}
	return out
}
