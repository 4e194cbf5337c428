// Package shardtest generates realistic, seeded trajectory rows for tests and benchmarks.
package shardtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/drmas-dev/drmas/shards"
)

// Options shape the generated rows. Zero fields take the documented defaults.
type Options struct {
	Seed      uint64
	Part      int      // part index the rows belong to (row ids); default 0
	Groups    int      // prompt groups (uids); default 4
	Samples   int      // trajectories per group; default 4
	Agents    []string // agent order; default solver, verifier
	MaxSteps  int      // steps per trajectory are 1..MaxSteps; default 2
	Tokens    int      // mean response length in tokens; default 8; prompt is 2× that
	Iteration int32
	Run       string // default "test"
	// DropAgent, when true, leaves the last agent out of roughly a third of the steps, so some
	// groups lack it entirely.
	DropAgent bool
}

// Rows returns rows sorted and numbered as a valid part (shards.CheckPart passes).
func Rows(o Options) []shards.Row {
	if o.Groups == 0 {
		o.Groups = 4
	}
	if o.Samples == 0 {
		o.Samples = 4
	}
	if len(o.Agents) == 0 {
		o.Agents = []string{"solver", "verifier"}
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 2
	}
	if o.Tokens == 0 {
		o.Tokens = 8
	}
	if o.Run == "" {
		o.Run = "test"
	}
	rng := rand.New(rand.NewPCG(o.Seed, uint64(o.Part)+1))
	var rows []shards.Row
	for g := 0; g < o.Groups; g++ {
		uid := fmt.Sprintf("u%02d-%06d", o.Part, g)
		task := fmt.Sprintf("task-%d-%d", o.Part, g)
		src := []string{"math_easy", "math_hard"}[g%2]
		for s := 0; s < o.Samples; s++ {
			reward := float64(rng.IntN(2))
			steps := 1 + rng.IntN(o.MaxSteps)
			for st := 0; st < steps; st++ {
				for ai, agent := range o.Agents {
					if o.DropAgent && ai == len(o.Agents)-1 && rng.IntN(3) == 0 {
						continue
					}
					valid := rng.IntN(10) != 0
					score := reward
					if !valid {
						score -= 0.1
					}
					nr := 1 + rng.IntN(2*o.Tokens)
					resp := make([]int32, nr)
					lp := make([]float32, nr)
					for i := range resp {
						resp[i] = int32(rng.IntN(256))
						lp[i] = -rng.Float32() * 5
					}
					prompt := make([]int32, 1+rng.IntN(4*o.Tokens))
					for i := range prompt {
						prompt[i] = int32(rng.IntN(259))
					}
					rows = append(rows, shards.Row{
						Run: o.Run, Iteration: o.Iteration, PolicyVersion: int64(o.Iteration),
						DataSource: src, TaskID: task, UID: uid,
						TrajUID: fmt.Sprintf("%s-s%02d", uid, s), Sample: int32(s), Step: int32(st),
						Agent: agent, Model: "m1",
						PromptIDs: prompt, ResponseIDs: resp, ResponseLogprobs: lp,
						PromptText: fmt.Sprintf("q%d?", g), ResponseText: fmt.Sprintf("ans %d", rng.IntN(100)),
						Valid: valid, Score: score, EpisodeReward: reward,
						FinishReason: []string{"stop", "length"}[rng.IntN(2)],
					})
				}
			}
		}
	}
	for i := range rows {
		rows[i].RowID = shards.RowID(o.Part, i)
	}
	return rows
}
