// Command verifiercheck measures a math run's verifier on the held-out prompts its evaluation
// uses (the same prompts, k and sampling seeds as `drmas run-stage evaluate`), paired over
// distinct questions: the accept rates on correct and on wrong candidates of each question
// that had both, their difference with its standard error, and what the verifier's retry is
// worth (the success of the final answer against that of the solver's first answer, which is
// what the team scores without a verifier), with the share of verdicts that follow from the
// verifier's work. It is an experiment tool (docs/testbed.md): the evaluation stage persists
// no per-question verdicts yet.
//
//	go run ./cmd/verifiercheck -config my.yaml [-seed 2] -steps 0,30 [-show 20]
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/workflows"
)

func meanSE(xs []float64) (float64, float64) {
	n := float64(len(xs))
	if n < 2 {
		return math.NaN(), math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / n
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / (n - 1) / n)
}

func main() {
	cfgPath := flag.String("config", "", "the run's config file (its store, run, seed, evaluate.* and tasks.eval_size)")
	steps := flag.String("steps", "0", "checkpoint steps, comma-separated")
	show := flag.Int("show", 0, "verifier turns to print")
	seed := flag.Uint64("seed", 0, "the run's seed when it was run with --seed (0: the config's)")
	flag.Parse()
	ctx := context.Background()
	cfg, err := configs.Load(configs.LoadOptions{File: *cfgPath, Context: ctx})
	must(err)
	if *seed != 0 {
		cfg.Seed = *seed
	}
	b, err := stages.OpenStore(ctx, cfg)
	must(err)
	env := &stages.Env{Bucket: b, Config: cfg}
	wf, err := stages.Workflow(cfg)
	must(err)
	tasks, err := stages.EvalTasks(cfg, wf)
	must(err)
	for _, st := range strings.Split(*steps, ",") {
		var step int64
		fmt.Sscan(st, &step)
		set, err := stages.LoadPolicy(ctx, env, step, false)
		must(err)
		backends, err := stages.Backends(cfg, set)
		must(err)
		var eps []*rollout.Episode
		for s := 0; s < len(tasks); s += 64 {
			chunk, err := rollout.Play(ctx, wf, tasks[s:min(s+64, len(tasks))], backends, rollout.PlayOptions{
				Samples:  cfg.Evaluate.K,
				Sampling: actors.Sampling{Temperature: cfg.Evaluate.Temperature, TopP: cfg.Evaluate.TopP, TopK: cfg.Evaluate.TopK, MaxTokens: cfg.Rollout.MaxTokens},
				Seed: func(t workflows.Task, sample, turn int) uint64 {
					return seeds.Derive(cfg.Seed, "eval", t.ID, sample, turn)
				},
			})
			must(err)
			eps = append(eps, chunk...)
		}
		report(step, eps, *show)
	}
}

// question tallies one held-out question's episodes: verdicts approved and judged on correct
// ([0]) and wrong ([1]) candidates, first answers and final answers right, episodes.
type question struct {
	acc, jud        [2]float64
	first, final, n float64
}

func (q *question) add(ep *rollout.Episode) {
	q.n++
	q.final += ep.Reward
	// The first verdict judged the solver's first answer; without one, the first answer is final.
	if (len(ep.Verdicts) > 0 && ep.Verdicts[0].CandidateCorrect) || (len(ep.Verdicts) == 0 && ep.Reward > 0) {
		q.first++
	}
	for _, v := range ep.Verdicts {
		i := 0
		if !v.CandidateCorrect {
			i = 1
		}
		q.jud[i]++
		if v.Approved {
			q.acc[i]++
		}
	}
}

// workStats counts the verifier turns, those whose work (the response up to its first space)
// equals the candidate, and those whose verdict is that equality; it prints up to *show turns.
type workStats struct{ turns, workIsCand, consistent float64 }

func (w *workStats) add(ep *rollout.Episode, show *int) {
	var cand string
	vi := 0
	for _, t := range ep.Turns {
		if t.Agent == workflows.AgentSolver {
			cand = strings.TrimPrefix(strings.TrimSpace(t.ResponseText), "ans ")
			continue
		}
		if t.Agent != workflows.AgentVerifier {
			continue
		}
		w.turns++
		work, _, _ := strings.Cut(strings.TrimSpace(t.ResponseText), " ")
		if work == cand {
			w.workIsCand++
		}
		if vi < len(ep.Verdicts) && ep.Verdicts[vi].Approved == (work == cand) {
			w.consistent++
		}
		vi++
		if *show > 0 {
			fmt.Printf("  Q %s ans %s | cand %q -> %q\n", ep.Task.Question, ep.Task.Answer, cand, t.ResponseText)
			*show--
		}
	}
}

func report(step int64, eps []*rollout.Episode, show int) {
	per := map[string]*question{}
	var order []string
	var ws workStats
	for _, ep := range eps {
		q := per[ep.Task.ID]
		if q == nil {
			q = &question{}
			per[ep.Task.ID] = q
			order = append(order, ep.Task.ID)
		}
		q.add(ep)
		ws.add(ep, &show)
	}
	var diffs, ac, aw, first, final, gain []float64
	var pa, pj [2]float64
	for _, id := range order {
		q := per[id]
		for i := range 2 {
			pa[i] += q.acc[i]
			pj[i] += q.jud[i]
		}
		if q.jud[0] > 0 && q.jud[1] > 0 {
			c, w := q.acc[0]/q.jud[0], q.acc[1]/q.jud[1]
			ac, aw, diffs = append(ac, c), append(aw, w), append(diffs, c-w)
		}
		first = append(first, q.first/q.n)
		final = append(final, q.final/q.n)
		gain = append(gain, (q.final-q.first)/q.n)
	}
	dm, ds := meanSE(diffs)
	cm, _ := meanSE(ac)
	wm, _ := meanSE(aw)
	fm, _ := meanSE(first)
	lm, _ := meanSE(final)
	gm, gs := meanSE(gain)
	fmt.Printf("step %d: pooled accept correct=%.3f wrong=%.3f (judged %.0f/%.0f) | paired over %d questions: correct %.3f wrong %.3f diff %+.3f ± %.3f | first-answer success %.3f final %.3f retry gain %+.3f ± %.3f | work==candidate %.3f verdict==[work==candidate] %.3f\n",
		step, pa[0]/pj[0], pa[1]/pj[1], pj[0], pj[1], len(diffs), cm, wm, dm, ds, fm, lm, gm, gs, ws.workIsCand/ws.turns, ws.consistent/ws.turns)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
