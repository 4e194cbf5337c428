package normalize_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
)

func threeParts(seed uint64) [][]shards.Row {
	var out [][]shards.Row
	for p := 0; p < 3; p++ {
		out = append(out, shardtest.Rows(shardtest.Options{Seed: seed, Part: p, Groups: 40, Agents: []string{"router", "searcher", "answerer"}, DropAgent: true, MaxSteps: 3}))
	}
	return out
}

func readSidecars(t *testing.T, env *stages.Env, est string) (map[string][]shards.AdvantageRow, *commit.Manifest) {
	t.Helper()
	ctx := context.Background()
	dir := layout.AdvantageDir(env.Config.Run, 0, est)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]shards.AdvantageRow{}
	for _, f := range m.Files {
		data, err := commit.ReadFile(ctx, env.Bucket, dir, f)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = rows
	}
	return out, m
}

// independentColumns builds kernel columns from rows with maps, independently of the stage's
// page decoding.
func independentColumns(rows []shards.Row) *estimators.Columns {
	groups, trajs, agents := map[string]int32{}, map[string]int32{}, map[string]int32{}
	code := func(m map[string]int32, k string) int32 {
		c, ok := m[k]
		if !ok {
			c = int32(len(m))
			m[k] = c
		}
		return c
	}
	c := &estimators.Columns{}
	for _, r := range rows {
		c.Group = append(c.Group, code(groups, r.UID))
		c.Traj = append(c.Traj, code(trajs, r.TrajUID))
		c.Agent = append(c.Agent, code(agents, r.Agent))
		c.Score = append(c.Score, r.Score)
	}
	c.NumAgents = len(agents)
	return c
}

func TestStageSidecarsMatchReference(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "search"))
	ps := threeParts(1)
	stagetest.WriteRollout(t, env, 0, ps, false)
	ests := []string{"drmas", "grpo", "grpo_step", "rloo_agent", "drgrpo"}
	res, err := normalize.Run(ctx, env, normalize.Options{Estimators: ests})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Estimators) != "[drmas grpo grpo_step rloo_agent grpo_nostd]" {
		t.Fatalf("estimators %v", res.Estimators)
	}
	for _, est := range res.Estimators {
		spec, _ := estimators.ParseSpec(est)
		got, m := readSidecars(t, env, est)
		if m.Rows != int64(len(ps[0])+len(ps[1])+len(ps[2])) || m.Params["estimator"] != est {
			t.Fatalf("%s manifest %+v", est, m)
		}
		for p, rows := range ps {
			want, err := estimators.Reference(spec, independentColumns(rows))
			if err != nil {
				t.Fatal(err)
			}
			side := got[shards.PartName(p, 3)]
			if len(side) != len(rows) {
				t.Fatalf("%s part %d: %d sidecar rows for %d rollout rows", est, p, len(side), len(rows))
			}
			for i, r := range rows {
				s := side[i]
				if s.RowID != r.RowID || s.UID != r.UID || s.Agent != r.Agent {
					t.Fatalf("%s part %d row %d: sidecar keys %+v not aligned with %+v", est, p, i, s, r)
				}
				if math.Abs(float64(s.Advantage-want.Advantage[i])) > 1e-6 || s.GroupSize != want.GroupSize[i] ||
					math.Abs(s.BaselineMean-want.BaselineMean[i]) > 1e-12 {
					t.Fatalf("%s part %d row %d: got %+v, reference A=%v μ=%v n=%d", est, p, i, s, want.Advantage[i], want.BaselineMean[i], want.GroupSize[i])
				}
			}
		}
		diag := res.Diagnostics[est]
		if len(diag) != 3 || diag[0].Agent != "answerer" || diag[0].Rows == 0 {
			t.Fatalf("%s diagnostics %+v", est, diag)
		}
	}
	again, err := normalize.Run(ctx, env, normalize.Options{Estimators: ests})
	if err != nil || len(again.Skipped) != len(ests) {
		t.Fatalf("rerun skipped %v, %v", again.Skipped, err)
	}
}

// TestStageHandWorked: one group; agent a has scores 1 and 0 in two trajectories, agent b a
// single row scoring 1.
//
//	drmas  a: μ=0.5, σ=√((0.25+0.25)/1)=0.70711 → A = ±0.5/0.70711 = ±0.70711; b: singleton → μ=0, σ=1, A=1/(1+ε)
//	grpo   trajectory means: t0=(1+1)/2=1, t1=0 → μ=0.5, σ=0.70711 → rows of t0: +0.70711, t1: −0.70711
func TestStageHandWorked(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	row := func(i int, traj string, sample int32, agent string, score float64) shards.Row {
		return shards.Row{RowID: shards.RowID(0, i), Run: "t", UID: "u", TrajUID: traj, Sample: sample, Agent: agent, Model: "m1", Score: score, EpisodeReward: score}
	}
	stagetest.WriteRollout(t, env, 0, [][]shards.Row{{row(0, "t0", 0, "a", 1), row(1, "t0", 0, "b", 1), row(2, "t1", 1, "a", 0)}}, false)
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas", "grpo"}}); err != nil {
		t.Fatal(err)
	}
	s := 0.5 / (math.Sqrt(0.5) + 1e-6)
	for est, want := range map[string][]float64{"drmas": {s, 1 / (1 + 1e-6), -s}, "grpo": {s, s, -s}} {
		got, _ := readSidecars(t, env, est)
		for i, w := range want {
			if a := float64(got[shards.PartName(0, 1)][i].Advantage); math.Abs(a-w) > 1e-6 {
				t.Errorf("%s row %d: advantage %v, want %v", est, i, a, w)
			}
		}
	}
}

func TestStageRerunIsByteIdentical(t *testing.T) {
	ctx := context.Background()
	var manifests []string
	for i := 0; i < 2; i++ {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		stagetest.WriteRollout(t, env, 0, threeParts(2), false)
		if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas", "grpo"}}); err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, dir := range []string{layout.AdvantageDir("t", 0, "drmas"), layout.AdvantageDir("t", 0, "grpo"), layout.DiagnosticsDir("t", 0, "drmas")} {
			data, err := storage.ReadAll(ctx, env.Bucket, path.Join(dir, commit.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, commit.Digest(data))
		}
		manifests = append(manifests, strings.Join(all, ","))
	}
	if manifests[0] != manifests[1] {
		t.Fatalf("two runs on the same rollout wrote different outputs: %s vs %s", manifests[0], manifests[1])
	}
}

func TestStageBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, env *stages.Env, want ...string) {
		t.Helper()
		_, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}})
		if err == nil {
			t.Fatal("no error")
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, err)
			}
		}
		var keys []string
		_ = env.Bucket.Iter(ctx, "runs/t/iter=000000/advantage/", func(k string) error { keys = append(keys, k); return nil })
		_ = env.Bucket.Iter(ctx, "runs/t/iter=000000/diagnostics/", func(k string) error { keys = append(keys, k); return nil })
		for _, k := range keys {
			if strings.HasSuffix(k, commit.ManifestName) {
				t.Fatalf("bad input was committed: %s", k)
			}
		}
	}
	t.Run("not committed", func(t *testing.T) {
		check(t, stagetest.Env(t, stagetest.Config(t, "math")), "rollout is not committed", "run-stage rollout")
	})
	t.Run("NaN score", func(t *testing.T) {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		ps := threeParts(3)
		ps[1][5].Score = math.NaN()
		stagetest.WriteRollout(t, env, 0, ps, true)
		check(t, env, "part-00001-of-00003.parquet", "row 5", "not finite")
	})
	t.Run("huge score", func(t *testing.T) {
		// Finite, but its group's σ (or, alone, its advantage) overflows.
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		ps := threeParts(7)
		ps[1][5].Score = 1e200
		stagetest.WriteRollout(t, env, 0, ps, true)
		// The row is named by its uid and agent (drmas: the first row of the row's agent in
		// its group, whose σ_k overflows), not only by the kernel's codes.
		check(t, env, "part-00001-of-00003.parquet", "is not finite", "scale them down",
			fmt.Sprintf("(uid %q, agent %q)", ps[1][5].UID, ps[1][5].Agent))
	})
	t.Run("uid split", func(t *testing.T) {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		ps := threeParts(4)
		ps[0][len(ps[0])-1].UID = ps[0][0].UID
		stagetest.WriteRollout(t, env, 0, ps, true)
		check(t, env, "part-00000-of-00003.parquet", "contiguous")
	})
	t.Run("samples interleaved", func(t *testing.T) {
		// Rows of a uid ordered by step before sample (a part written by another tool): a
		// trajectory is a (uid, sample) run, so grpo would split trajectories and commit wrong
		// advantages; the part is refused instead.
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		ps := threeParts(8)
		rs := ps[1]
		sort.SliceStable(rs, func(i, j int) bool {
			if rs[i].UID != rs[j].UID {
				return rs[i].UID < rs[j].UID
			}
			return rs[i].Step < rs[j].Step
		})
		for i := range rs {
			rs[i].RowID = shards.RowID(1, i)
		}
		stagetest.WriteRollout(t, env, 0, ps, true)
		_, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas", "grpo"}})
		if err == nil || !strings.Contains(err.Error(), "part-00001-of-00003.parquet") || !strings.Contains(err.Error(), "sorted by (sample, step)") {
			t.Fatalf("want an error naming the part and the order, got %v", err)
		}
		for _, est := range []string{"drmas", "grpo"} {
			if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.AdvantageDir("t", 0, est)); ok {
				t.Fatalf("%s: bad input was committed", est)
			}
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		stagetest.WriteRollout(t, env, 0, threeParts(5), false)
		key := path.Join(layout.RolloutDir("t", 0), shards.PartName(2, 3))
		attr, _ := env.Bucket.Stat(ctx, key)
		if err := storage.PutBytes(ctx, env.Bucket, key, bytes.Repeat([]byte("x"), int(attr.Size))); err != nil {
			t.Fatal(err)
		}
		check(t, env, "part-00002-of-00003.parquet")
	})
	t.Run("unknown estimator", func(t *testing.T) {
		env := stagetest.Env(t, stagetest.Config(t, "math"))
		stagetest.WriteRollout(t, env, 0, threeParts(6), false)
		_, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas", "bogus"}})
		if err == nil || !strings.Contains(err.Error(), "bogus") {
			t.Fatalf("want an error naming the estimator, got %v", err)
		}
	})
}

// TestShardedNormalizeEqualsSingleProcess: two shard workers (and a late duplicate) produce the
// same committed folders as one process, and only the worker that completes the set commits.
func TestShardedNormalizeEqualsSingleProcess(t *testing.T) {
	ctx := context.Background()
	ests := []string{"drmas", "grpo"}
	digests := func(env *stages.Env) string {
		var all []string
		for _, dir := range []string{layout.AdvantageDir("t", 0, "drmas"), layout.AdvantageDir("t", 0, "grpo"),
			layout.DiagnosticsDir("t", 0, "drmas"), layout.DiagnosticsDir("t", 0, "grpo")} {
			data, err := storage.ReadAll(ctx, env.Bucket, path.Join(dir, commit.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, commit.Digest(data))
		}
		return strings.Join(all, ",")
	}
	single := stagetest.Env(t, stagetest.Config(t, "math"))
	stagetest.WriteRollout(t, single, 0, threeParts(8), false)
	if _, err := normalize.Run(ctx, single, normalize.Options{Estimators: ests}); err != nil {
		t.Fatal(err)
	}
	sharded := stagetest.Env(t, stagetest.Config(t, "math"))
	stagetest.WriteRollout(t, sharded, 0, threeParts(8), false)
	first, err := normalize.Run(ctx, sharded, normalize.Options{Estimators: ests, Shard: jobs.Shard{Index: 1, Count: 2}})
	if err != nil || len(first.Pending) != 2 {
		t.Fatalf("first shard: %+v %v; want both estimators pending", first, err)
	}
	if ok, _ := commit.IsCommitted(ctx, sharded.Bucket, layout.AdvantageDir("t", 0, "drmas")); ok {
		t.Fatal("committed before every part was written")
	}
	second, err := normalize.Run(ctx, sharded, normalize.Options{Estimators: ests, Shard: jobs.Shard{Index: 0, Count: 2}})
	if err != nil || len(second.Pending) != 0 || len(second.Diagnostics["drmas"]) == 0 {
		t.Fatalf("second shard: %+v %v", second, err)
	}
	late, err := normalize.Run(ctx, sharded, normalize.Options{Estimators: ests, Shard: jobs.Shard{Index: 1, Count: 2}})
	if err != nil || len(late.Skipped) != 2 {
		t.Fatalf("late duplicate: %+v %v", late, err)
	}
	if a, b := digests(single), digests(sharded); a != b {
		t.Fatalf("sharded outputs differ from the single process:\n%s\n%s", a, b)
	}
	var receipts []string
	_ = sharded.Bucket.Iter(ctx, "runs/t/iter=000000/advantage/", func(k string) error {
		if strings.Contains(k, commit.ReceiptsDir) {
			receipts = append(receipts, k)
		}
		return nil
	})
	if len(receipts) != 0 {
		t.Fatalf("receipts left: %v", receipts)
	}
}

// TestStageDiagnosticsAdvStdLargeMean: adv_std of advantages whose mean is large next to their
// spread. Every uid has one row, so under drmas_nostd each advantage is the score itself
// (singleton rule μ = 0): about 1000 with a spread of ~5e-4. Σx²/n − mean² loses that spread to
// cancellation (5% off here); the per-part two-pass sums merged pairwise keep it.
func TestStageDiagnosticsAdvStdLargeMean(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	const perPart = 10000
	var ps [][]shards.Row
	var advs []float64
	for p := 0; p < 2; p++ {
		var part []shards.Row
		for i := 0; i < perPart; i++ {
			j := p*perPart + i
			score := 1000 + float64(j%2)*1e-3 + float64(j%7)*1e-4
			uid := fmt.Sprintf("u%05d", j)
			part = append(part, shards.Row{RowID: shards.RowID(p, i), Run: "t", UID: uid, TrajUID: uid + "-0",
				Agent: "solver", Model: "m1", Score: score, EpisodeReward: score})
			advs = append(advs, float64(float32(score)))
		}
		ps = append(ps, part)
	}
	stagetest.WriteRollout(t, env, 0, ps, false)
	res, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas_nostd"}})
	if err != nil {
		t.Fatal(err)
	}
	var mean, m2 float64
	for _, a := range advs {
		mean += a
	}
	mean /= float64(len(advs))
	for _, a := range advs {
		m2 += (a - mean) * (a - mean)
	}
	want := math.Sqrt(m2 / float64(len(advs)))
	d := res.Diagnostics["drmas_nostd"]
	if len(d) != 1 || math.Abs(d[0].AdvMean-mean) > 1e-9*mean {
		t.Fatalf("diagnostics %+v, want adv_mean %v", d, mean)
	}
	if got := d[0].AdvStd; math.Abs(got-want) > 1e-6*want {
		t.Fatalf("adv_std %.9g, want %.9g (population std of the advantages)", got, want)
	}
}

// TestStageStaleAdvantagesRefused: an advantage folder committed from a rollout that has since
// been replaced (the rollout folder deleted and rolled out or imported again with other rows)
// is not reported as "already committed": its advantages describe other rows.
func TestStageStaleAdvantagesRefused(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	stagetest.WriteRollout(t, env, 0, threeParts(11), false)
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"grpo_step"}}); err != nil {
		t.Fatal(err)
	}
	stagetest.DeleteFolder(t, env, layout.RolloutDir("t", 0))
	ps := threeParts(11)
	for _, p := range ps {
		for i := range p {
			p[i].Score = -p[i].Score
		}
	}
	stagetest.WriteRollout(t, env, 0, ps, false)
	_, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"grpo_step"}})
	// What to delete is cmd/drmas's advice, from the error's fields.
	var se *stages.StaleAdvantagesError
	if err == nil || !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "committed from another rollout") ||
		!errors.As(err, &se) || se.Dir != layout.AdvantageDir("t", 0, "grpo_step") || se.Diagnostics != layout.DiagnosticsDir("t", 0, "grpo_step") || se.Estimator != "grpo_step" {
		t.Fatalf("want an error saying the advantages are from another rollout, got %v (%+v)", err, se)
	}
}

// TestStageDiagnosticsOverflowIsNamed: scores whose every group statistic is finite but whose
// sums over an agent's groups overflow float64 fail with an error that names the agent and
// says to scale the scores down (it was "json: unsupported value: +Inf"); nothing is committed.
func TestStageDiagnosticsOverflowIsNamed(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	// No agent has a single row in a group, so every advantage is 0 (σ_k = 0) and every group
	// statistic finite (≤ 16 rows of 1e307); the sum of μ over 100 groups is not.
	var ps [][]shards.Row
	for p := range 2 {
		rows := shardtest.Rows(shardtest.Options{Seed: 12, Part: p, Groups: 100, Samples: 4, MaxSteps: 2})
		for i := range rows {
			rows[i].Score = 1e307
		}
		ps = append(ps, rows)
	}
	stagetest.WriteRollout(t, env, 0, ps, false)
	_, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}})
	if err == nil || !strings.Contains(err.Error(), "scale them down") || !strings.Contains(err.Error(), "agent ") || strings.Contains(err.Error(), "json") {
		t.Fatalf("want an error naming the agent and saying to scale the scores down, got %v", err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.AdvantageDir("t", 0, "drmas")); ok {
		t.Fatal("committed")
	}
}
