package estimators

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// allSpecs are the estimators every property test runs.
var allSpecNames = []string{"grpo", "grpo_nostd", "drmas", "drmas_nostd", "drmas_eps0.01", "grpo_step",
	"grpo_step_nostd", "rloo", "rloo_agent"}

func allSpecs(t testing.TB) []Spec {
	specs := make([]Spec, len(allSpecNames))
	for i, n := range allSpecNames {
		s, err := ParseSpec(n)
		if err != nil {
			t.Fatal(err)
		}
		specs[i] = s
	}
	return specs
}

// randomColumns builds valid columns with nGroups groups: random distinct group codes in random
// (non-increasing) order, 1–6 trajectories (sometimes 40, to exercise the dense trajectory
// table), 1–3 steps, random subsets of agents (agents missing from trajectories or groups), and
// scores that are sometimes ties, sometimes constant over a group, sometimes continuous.
// Trajectory codes are sometimes global, sometimes reused per group, and rows are sometimes
// shuffled within their group (trajectories not adjacent).
func randomColumns(r *rand.Rand, nGroups int) *Columns {
	numAgents := 1 + r.IntN(4)
	c := &Columns{NumAgents: numAgents}
	codes := r.Perm(3*nGroups + 1)[:nGroups]
	nextTraj := int32(0)
	for _, g := range codes {
		nt := 1 + r.IntN(6)
		switch r.IntN(20) {
		case 0:
			nt = 1
		case 1:
			nt = 40
		}
		mode := r.IntN(4)
		constant := float64(r.IntN(3)) / 2
		localTraj := r.IntN(3) == 0
		start := len(c.Score)
		for ti := range nt {
			traj := nextTraj
			if localTraj {
				traj = int32(ti)
			}
			nextTraj++
			steps := 1 + r.IntN(3)
			rows := 0
			for range steps {
				for a := range numAgents {
					if r.IntN(3) == 0 && !(rows == 0 && a == numAgents-1) {
						continue // agent missing from this step (every trajectory keeps ≥ 1 row)
					}
					var x float64
					switch mode {
					case 0: // ties
						x = float64(r.IntN(2))
					case 1: // constant over the group
						x = constant
					case 2: // penalised binary
						x = float64(r.IntN(2)) - 0.1*float64(r.IntN(2))
					default:
						x = r.NormFloat64() * 3
					}
					c.Group = append(c.Group, int32(g))
					c.Traj = append(c.Traj, traj)
					c.Agent = append(c.Agent, int32(a))
					c.Score = append(c.Score, x)
					rows++
				}
			}
		}
		if r.IntN(4) == 0 { // shuffle the group's rows
			end := len(c.Score)
			r.Shuffle(end-start, func(i, j int) {
				i, j = i+start, j+start
				c.Traj[i], c.Traj[j] = c.Traj[j], c.Traj[i]
				c.Agent[i], c.Agent[j] = c.Agent[j], c.Agent[i]
				c.Score[i], c.Score[j] = c.Score[j], c.Score[i]
			})
		}
	}
	return c
}

// diffResult describes the first difference between two results ("" if none): float64
// statistics within 1e-9 relative, float32 advantages within 1e-6 relative, sizes exact; the
// advantage and baseline mean of row i also within slack[i] absolute (rlooSlack, to compare
// rloo with Reference; nil for none).
func diffResult(got, want Result, slack []float64) string {
	if len(got.Advantage) != len(want.Advantage) {
		return fmt.Sprintf("length %d, want %d", len(got.Advantage), len(want.Advantage))
	}
	for i := range want.Advantage {
		sl := 0.0
		if slack != nil {
			sl = slack[i]
		}
		a, b := float64(got.Advantage[i]), float64(want.Advantage[i])
		if !closeRel(a, b, 1e-6, sl) {
			return fmt.Sprintf("row %d: advantage %v, want %v", i, a, b)
		}
		if !closeRel(got.BaselineMean[i], want.BaselineMean[i], 1e-9, sl) {
			return fmt.Sprintf("row %d: baseline mean %v, want %v", i, got.BaselineMean[i], want.BaselineMean[i])
		}
		if !close64(got.BaselineStd[i], want.BaselineStd[i], 1e-9) {
			return fmt.Sprintf("row %d: baseline std %v, want %v", i, got.BaselineStd[i], want.BaselineStd[i])
		}
		if got.GroupSize[i] != want.GroupSize[i] {
			return fmt.Sprintf("row %d: group size %d, want %d", i, got.GroupSize[i], want.GroupSize[i])
		}
	}
	return ""
}

func TestComputeMatchesReference(t *testing.T) {
	ctx := context.Background()
	specs := allSpecs(t)
	r := rand.New(rand.NewPCG(1, 2))
	// One Result per spec, reused across inputs of varying size (exercises reuse).
	outs := make([]*Result, len(specs))
	for i := range outs {
		outs[i] = new(Result)
	}
	many := make([]*Result, len(specs))
	for i := range many {
		many[i] = new(Result)
	}
	for iter := range 300 {
		cols := randomColumns(r, 1+r.IntN(30))
		if err := cols.Validate(); err != nil {
			t.Fatalf("iteration %d: generator made invalid columns: %v", iter, err)
		}
		if err := ComputeMany(ctx, specs, cols, many); err != nil {
			t.Fatalf("iteration %d: ComputeMany: %v", iter, err)
		}
		for j, spec := range specs {
			if err := Compute(ctx, spec, cols, outs[j]); err != nil {
				t.Fatalf("iteration %d %s: %v", iter, spec.Name(), err)
			}
			if !spec.UsesTraj() {
				// Any Traj gives the same result.
				flat := *cols
				flat.Traj = make([]int32, len(cols.Traj))
				var r Result
				if err := Compute(ctx, spec, &flat, &r); err != nil {
					t.Fatal(err)
				}
				o := outs[j]
				if !reflect.DeepEqual(r.Advantage, o.Advantage) || !reflect.DeepEqual(r.BaselineMean, o.BaselineMean) ||
					!reflect.DeepEqual(r.BaselineStd, o.BaselineStd) || !reflect.DeepEqual(r.GroupSize, o.GroupSize) {
					t.Fatalf("iteration %d %s: !UsesTraj, but the result depends on Traj", iter, spec.Name())
				}
			}
			if spec.PerPair() {
				// The statistics are the same on every row of a (group, agent) pair.
				type pk struct{ g, a int32 }
				first := map[pk]int{}
				o := outs[j]
				for i := range cols.Score {
					k := pk{cols.Group[i], cols.Agent[i]}
					f, ok := first[k]
					if !ok {
						first[k] = i
						continue
					}
					if o.BaselineMean[i] != o.BaselineMean[f] || o.BaselineStd[i] != o.BaselineStd[f] || o.GroupSize[i] != o.GroupSize[f] {
						t.Fatalf("iteration %d %s: PerPair, but row %d's statistics differ from row %d's", iter, spec.Name(), i, f)
					}
				}
			}
			ref, err := Reference(spec, cols)
			if err != nil {
				t.Fatalf("iteration %d %s reference: %v", iter, spec.Name(), err)
			}
			if d := diffResult(*outs[j], ref, rlooSlack(spec, cols)); d != "" {
				t.Fatalf("iteration %d %s: Compute vs Reference: %s", iter, spec.Name(), d)
			}
			if d := diffResult(*many[j], *outs[j], nil); d != "" {
				t.Fatalf("iteration %d %s: ComputeMany vs Compute: %s", iter, spec.Name(), d)
			}
		}
		fd, err := Diagnose(cols)
		if err != nil {
			t.Fatal(err)
		}
		// The fused pass gives exactly Diagnose's statistics and ComputeMany's results.
		fused := make([]*Result, len(specs))
		for i := range fused {
			fused[i] = new(Result)
		}
		n := 1 + iter%len(specs)
		cd, err := ComputeWithDiagnostics(ctx, specs[:n], cols, fused[:n], nil)
		if err != nil {
			t.Fatalf("iteration %d: ComputeWithDiagnostics: %v", iter, err)
		}
		if !reflect.DeepEqual(cd, fd) {
			t.Fatalf("iteration %d: ComputeWithDiagnostics diagnostics differ from Diagnose:\n got %+v\nwant %+v", iter, cd, fd)
		}
		for j := range n {
			a, b := fused[j], many[j]
			if !reflect.DeepEqual(a.Advantage, b.Advantage) || !reflect.DeepEqual(a.BaselineMean, b.BaselineMean) ||
				!reflect.DeepEqual(a.BaselineStd, b.BaselineStd) || !reflect.DeepEqual(a.GroupSize, b.GroupSize) {
				t.Fatalf("iteration %d %s: ComputeWithDiagnostics and ComputeMany results differ", iter, specs[j].Name())
			}
		}
		rd, err := DiagnoseReference(cols)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rd {
			if d := diffDiag(fd[k], rd[k], 1e-9); d != "" {
				t.Fatalf("iteration %d agent %d: Diagnose vs reference: %s\n got %+v\nwant %+v", iter, k, d, fd[k], rd[k])
			}
		}
	}
}

// TestReferenceIndependent checks the oracle itself on properties that follow from the
// definitions rather than from a second implementation.
func TestReferenceProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		cols := randomColumns(r, 1+r.IntN(10))
		for _, name := range []string{"drmas_nostd", "grpo_step_nostd", "rloo", "rloo_agent"} {
			spec, _ := ParseSpec(name)
			res, err := Reference(spec, cols)
			if err != nil {
				t.Fatal(err)
			}
			// Without σ and outside singletons, advantages of a statistic's elements sum to ~0; for
			// rloo A = n/(n−1)·(x − mean) also sums to 0 per group.
			sums := map[refKey]float64{}
			sizes := map[refKey]int32{}
			for i, a := range res.Advantage {
				k := refKey{cols.Group[i], -1}
				if spec.Estimator == DrMAS || spec.PerAgent {
					k.sub = cols.Agent[i]
				}
				sums[k] += float64(a)
				sizes[k] = res.GroupSize[i]
			}
			for k, s := range sums {
				if sizes[k] > 1 && math.Abs(s) > 1e-4 {
					t.Fatalf("%s: group %v advantages sum to %v", name, k, s)
				}
			}
		}
	}
}

func TestEmpty(t *testing.T) {
	for _, spec := range allSpecs(t) {
		var out Result
		if err := Compute(context.Background(), spec, &Columns{}, &out); err != nil || len(out.Advantage) != 0 {
			t.Fatalf("%s on empty columns: %v, %d rows", spec.Name(), err, len(out.Advantage))
		}
	}
	if d, err := Diagnose(&Columns{NumAgents: 2}); err != nil || len(d) != 2 || d[0].Groups != 0 {
		t.Fatalf("Diagnose on empty columns: %+v, %v", d, err)
	}
}

func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *Columns)
		wants []string
	}{
		{"nan", func(c *Columns) { c.Score[2] = math.NaN() }, []string{"non-finite score at row 2 (NaN)"}},
		{"inf", func(c *Columns) { c.Score[4] = math.Inf(1); c.Score[8] = math.Inf(-1) },
			[]string{"non-finite score at row 4 (+Inf), row 8 (-Inf)"}},
		{"many nan", func(c *Columns) {
			for i := range c.Score {
				c.Score[i] = math.NaN()
			}
		}, []string{"row 0 (NaN), row 1 (NaN), row 2 (NaN), row 3 (NaN), row 4 (NaN), … (9 rows in all)"}},
		{"non-contiguous", func(c *Columns) { c.Group[8] = 7 },
			[]string{"group 7 resumes at row 8 after its rows ended at row 4", "not contiguous"}},
		{"length", func(c *Columns) { c.Score = c.Score[:8] },
			[]string{"column lengths differ: Score has 8 rows, Group 9, Traj 9, Agent 9"}},
		{"negative", func(c *Columns) { c.Traj[3] = -1; c.Group[0] = -2 },
			[]string{"negative Traj code at row 3 (-1)", "negative Group code at row 0 (-2)"}},
		{"agent range", func(c *Columns) { c.Agent[5] = 3 }, []string{"Agent code not below NumAgents=3 at row 5 (3)"}},
		{"no agents", func(c *Columns) { c.NumAgents = 0 }, []string{"NumAgents is 0 but there are 9 rows"}},
		{"several at once", func(c *Columns) { c.Score[1] = math.NaN(); c.Group[8] = 7; c.Agent[0] = -1 },
			[]string{"row 1 (NaN)", "group 7 resumes at row 8", "negative Agent code at row 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := goldenCols()
			tc.edit(cols)
			check := func(who string, err error) {
				t.Helper()
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("%s: error %v, want a *ValidationError", who, err)
				}
				for _, w := range tc.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %q", who, err, w)
					}
				}
			}
			check("Validate", cols.Validate())
			for _, spec := range allSpecs(t) {
				check("Compute "+spec.Name(), Compute(context.Background(), spec, cols, &Result{}))
				_, err := Reference(spec, cols)
				check("Reference "+spec.Name(), err)
			}
			_, err := Diagnose(cols)
			check("Diagnose", err)
			_, err = DiagnoseReference(cols)
			check("DiagnoseReference", err)
		})
	}
}

func TestContiguityLargeCodes(t *testing.T) {
	// Codes far above the row count take the sort path of the contiguity check.
	cols := &Columns{
		Group: []int32{math.MaxInt32, 5, math.MaxInt32}, Traj: []int32{0, 1, 2}, Agent: []int32{0, 0, 0},
		Score: []float64{1, 2, 3}, NumAgents: 1,
	}
	if err := Compute(context.Background(), Spec{Estimator: DrMAS, NormStd: true}, cols, &Result{}); err == nil ||
		!strings.Contains(err.Error(), "resumes at row 2") {
		t.Fatalf("got %v", err)
	}
	cols.Group[2] = 1 << 30
	if err := Compute(context.Background(), Spec{Estimator: DrMAS, NormStd: true}, cols, &Result{}); err != nil {
		t.Fatal(err)
	}
}

func TestHugeTrajCodes(t *testing.T) {
	// One group of 50 trajectories with codes too large for the dense table, interleaved.
	cols := &Columns{NumAgents: 1}
	for rep := range 2 {
		for j := range 50 {
			cols.Group = append(cols.Group, 0)
			cols.Traj = append(cols.Traj, math.MaxInt32-int32(j))
			cols.Agent = append(cols.Agent, 0)
			cols.Score = append(cols.Score, float64(j*(rep+1)))
		}
	}
	spec := Spec{Estimator: GRPO, NormStd: true}
	var out Result
	if err := Compute(context.Background(), spec, cols, &out); err != nil {
		t.Fatal(err)
	}
	ref, _ := Reference(spec, cols)
	if d := diffResult(out, ref, nil); d != "" {
		t.Fatal(d)
	}
	if out.GroupSize[0] != 50 {
		t.Fatalf("group size %d, want 50", out.GroupSize[0])
	}
}

func TestCancel(t *testing.T) {
	cols := randomColumns(rand.New(rand.NewPCG(5, 6)), 20000)
	if len(cols.Score) < 2*ctxEvery {
		t.Fatalf("only %d rows", len(cols.Score))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Compute(ctx, Spec{Estimator: DrMAS, NormStd: true}, cols, &Result{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestComputeManyArgs(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Estimator: DrMAS, NormStd: true}
	r := new(Result)
	if err := ComputeMany(ctx, []Spec{spec}, goldenCols(), nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
	if err := ComputeMany(ctx, []Spec{spec}, goldenCols(), []*Result{nil}); err == nil {
		t.Error("nil result accepted")
	}
	if err := ComputeMany(ctx, []Spec{spec, spec}, goldenCols(), []*Result{r, r}); err == nil {
		t.Error("aliased results accepted")
	}
}

func TestNoAllocs(t *testing.T) {
	cols := randomColumns(rand.New(rand.NewPCG(7, 8)), 500)
	specs := allSpecs(t)
	if invariants.Enabled {
		t.Skip("with the invariants tag every call also runs the allocating Reference")
	}
	outs := make([]*Result, len(specs))
	for i := range outs {
		outs[i] = new(Result)
	}
	ctx := context.Background()
	for i, spec := range specs {
		out := outs[i]
		if n := testing.AllocsPerRun(5, func() {
			if err := Compute(ctx, spec, cols, out); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Compute %s: %v allocations per run", spec.Name(), n)
		}
	}
	if n := testing.AllocsPerRun(5, func() {
		if err := ComputeMany(ctx, specs, cols, outs); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ComputeMany: %v allocations per run", n)
	}
}

// TestSparseStats: a Result with SparseStats has every advantage and, for a PerPair spec, one
// statistics entry per (group, agent) pair and block, in the order of the pairs' first rows,
// equal to the full result's statistics on that row; a spec that is not PerPair keeps per-row
// statistics.
func TestSparseStats(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 200 {
		cols := randomColumns(r, 1+r.IntN(30))
		for _, name := range []string{"drmas", "drmas_nostd", "grpo", "grpo_step", "rloo_agent"} {
			spec, err := ParseSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			var full Result
			if err := Compute(ctx, spec, cols, &full); err != nil {
				t.Fatal(err)
			}
			block := []int{1, 3, 7, 64, 1 << 20}[iter%5]
			sparse := Result{SparseStats: block}
			// Twice: a reused Result must not keep the previous call's entries.
			for range 2 {
				if _, err := ComputeWithDiagnostics(ctx, []Spec{spec}, cols, []*Result{&sparse}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(sparse.Advantage, full.Advantage) {
				t.Fatalf("iteration %d %s block %d: advantages differ", iter, name, block)
			}
			if !spec.PerPair() {
				if !reflect.DeepEqual(sparse.BaselineMean, full.BaselineMean) || !reflect.DeepEqual(sparse.GroupSize, full.GroupSize) || len(sparse.PairRow) != 0 {
					t.Fatalf("iteration %d %s: a spec that is not PerPair changed its statistics", iter, name)
				}
				continue
			}
			// The expected entries, by an independent scan: first row of each (block, group,
			// agent), in row order.
			type key struct{ b, g, a int32 }
			seen := map[key]bool{}
			var rows []int32
			for i := range cols.Score {
				k := key{int32(i / block), cols.Group[i], cols.Agent[i]}
				if !seen[k] {
					seen[k] = true
					rows = append(rows, int32(i))
				}
			}
			if !reflect.DeepEqual(sparse.PairRow, rows) {
				t.Fatalf("iteration %d %s block %d: PairRow %v, want %v", iter, name, block, sparse.PairRow, rows)
			}
			if len(sparse.BaselineMean) != len(rows) || len(sparse.BaselineStd) != len(rows) || len(sparse.GroupSize) != len(rows) {
				t.Fatalf("iteration %d %s block %d: %d/%d/%d entries, want %d", iter, name, block,
					len(sparse.BaselineMean), len(sparse.BaselineStd), len(sparse.GroupSize), len(rows))
			}
			for j, i := range rows {
				if sparse.BaselineMean[j] != full.BaselineMean[i] || sparse.BaselineStd[j] != full.BaselineStd[i] || sparse.GroupSize[j] != full.GroupSize[i] {
					t.Fatalf("iteration %d %s block %d: entry %d (row %d): statistics differ", iter, name, block, j, i)
				}
			}
		}
	}
}

// TestNilTraj: without trajectory codes every estimator but grpo gives the same result, and
// grpo is refused with an error that says why.
func TestNilTraj(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		cols := randomColumns(r, 1+r.IntN(20))
		noTraj := *cols
		noTraj.Traj = nil
		for _, name := range []string{"drmas", "grpo_step", "rloo", "rloo_agent"} {
			spec, _ := ParseSpec(name)
			var a, b Result
			if err := Compute(ctx, spec, cols, &a); err != nil {
				t.Fatal(err)
			}
			if err := Compute(ctx, spec, &noTraj, &b); err != nil {
				t.Fatalf("%s without Traj: %v", name, err)
			}
			if !reflect.DeepEqual(a.Advantage, b.Advantage) || !reflect.DeepEqual(a.BaselineMean, b.BaselineMean) {
				t.Fatalf("%s: results differ without Traj", name)
			}
		}
		if err := Compute(ctx, Spec{Estimator: GRPO, NormStd: true}, &noTraj, &Result{}); err == nil || !strings.Contains(err.Error(), "Traj") {
			t.Fatalf("grpo without Traj: err = %v, want one naming Traj", err)
		}
	}
	// Reference refuses grpo without Traj with Compute's error (it used to index the nil
	// slice), also when the rows are invalid too; a length mismatch is reported first by both.
	for _, tc := range []struct {
		name string
		edit func(c *Columns)
		want string
	}{
		{"valid rows", func(c *Columns) {}, "Columns.Traj is nil"},
		{"nan score", func(c *Columns) { c.Score[1] = math.NaN() }, "Columns.Traj is nil"},
		{"length", func(c *Columns) { c.Agent = c.Agent[:3] }, "column lengths differ"},
	} {
		cols := goldenCols()
		cols.Traj = nil
		tc.edit(cols)
		for _, name := range []string{"grpo", "grpo_nostd"} {
			spec, _ := ParseSpec(name)
			err := Compute(ctx, spec, cols, &Result{})
			_, refErr := Reference(spec, cols)
			if err == nil || refErr == nil || err.Error() != refErr.Error() || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s without Traj: Compute error %v, Reference error %v, want both saying %q", tc.name, name, err, refErr, tc.want)
			}
		}
	}
}
