package estimators

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

const benchRows = 10_000_000

var (
	benchOnce sync.Once
	benchData *Columns
)

// benchColumns is a 10 M-row shard shaped like the math workflow: groups of 8 trajectories,
// 3 agents, 1–3 steps (the last step of a trajectory sometimes lacks the third agent), binary
// rewards with an occasional invalid-action penalty; group codes in random order.
func benchColumns() *Columns {
	benchOnce.Do(func() {
		r := rand.New(rand.NewPCG(42, 43))
		c := &Columns{
			Group: make([]int32, 0, benchRows), Traj: make([]int32, 0, benchRows),
			Agent: make([]int32, 0, benchRows), Score: make([]float64, 0, benchRows), NumAgents: 3,
		}
		traj := int32(0)
		codes := r.Perm(benchRows / 8)
		for gi := 0; len(c.Score) < benchRows; gi++ {
			g := int32(codes[gi])
			for range 8 {
				reward := float64(r.IntN(2))
				steps := 1 + r.IntN(3)
				for s := range steps {
					for a := range 3 {
						if a == 2 && s == steps-1 && r.IntN(2) == 0 {
							continue
						}
						x := reward
						if r.IntN(10) == 0 {
							x -= 0.1
						}
						c.Group = append(c.Group, g)
						c.Traj = append(c.Traj, traj)
						c.Agent = append(c.Agent, int32(a))
						c.Score = append(c.Score, x)
					}
				}
				traj++
			}
		}
		n := benchRows
		c.Group, c.Traj, c.Agent, c.Score = c.Group[:n], c.Traj[:n], c.Agent[:n], c.Score[:n]
		benchData = c
	})
	return benchData
}

func reportRows(b *testing.B, rows int) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkCompute(b *testing.B) {
	cols := benchColumns()
	ctx := context.Background()
	for _, name := range allSpecNames {
		spec, err := ParseSpec(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("est="+name, func(b *testing.B) {
			var out Result
			if err := Compute(ctx, spec, cols, &out); err != nil { // sizes the outputs
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := Compute(ctx, spec, cols, &out); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, len(cols.Score))
		})
	}
}

func BenchmarkComputeMany(b *testing.B) {
	cols := benchColumns()
	ctx := context.Background()
	for _, set := range []struct {
		name  string
		specs []string
	}{
		{"grpo+drmas+grpo_step", []string{"grpo", "drmas", "grpo_step"}},
		{"all9", allSpecNames},
	} {
		b.Run(set.name, func(b *testing.B) {
			specs := make([]Spec, len(set.specs))
			outs := make([]*Result, len(set.specs))
			for i, n := range set.specs {
				specs[i], _ = ParseSpec(n)
				outs[i] = new(Result)
			}
			if err := ComputeMany(ctx, specs, cols, outs); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := ComputeMany(ctx, specs, cols, outs); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, len(cols.Score))
		})
	}
}

func BenchmarkDiagnose(b *testing.B) {
	cols := benchColumns()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Diagnose(cols); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, len(cols.Score))
}

func BenchmarkValidate(b *testing.B) {
	cols := benchColumns()
	b.ReportAllocs()
	for b.Loop() {
		if err := cols.Validate(); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, len(cols.Score))
}
