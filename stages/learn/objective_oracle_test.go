package learn_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/learn"
)

// oracleRow is one example as the PyTorch oracle reads it.
type oracleRow struct {
	LP    []float64 `json:"lp"`
	Old   []float64 `json:"old"`
	Ref   []float64 `json:"ref"`
	Behav []float64 `json:"behav"`
	Ent   []float64 `json:"ent"`
	Adv   float64   `json:"adv"`
	Agent string    `json:"agent"`
	UID   string    `json:"uid"`
}

type oracleOpts struct {
	LossAgg      string  `json:"loss_agg"`
	NormLen      int     `json:"norm_len"`
	ClipLow      float64 `json:"clip_low"`
	ClipHigh     float64 `json:"clip_high"`
	ClipC        float64 `json:"clip_c"`
	SeqRatio     bool    `json:"seq_ratio"`
	SeqClipLow   float64 `json:"seq_clip_low"`
	SeqClipHigh  float64 `json:"seq_clip_high"`
	EntropyCoef  float64 `json:"entropy_coef"`
	AgentBalance bool    `json:"agent_balance"`
	KLCoef       float64 `json:"kl_coef"`
	KLType       string  `json:"kl_type"`
	RolloutIS    string  `json:"rollout_is"`
	ISCap        float64 `json:"is_cap"`
	ISMask       bool    `json:"is_mask"`
}

type oracleCase struct {
	Opts oracleOpts  `json:"opts"`
	Rows []oracleRow `json:"rows"`
}

type oracleOut struct {
	Loss    float64     `json:"loss"`
	D       [][]float64 `json:"d"`
	DE      [][]float64 `json:"de"`
	Clipped int         `json:"clipped"`
	Dual    int         `json:"dual"`
}

// objectiveRows returns rows of mixed lengths (1 to 9 tokens), three agents over three prompt
// groups with uneven counts, advantages of both signs (and one 0), and policy, old, reference
// and sampler log-probs apart enough that every clip and cap is reached; as float32, as the
// learner sees them.
func objectiveRows() []oracleRow {
	rng := rand.New(rand.NewPCG(37, 9))
	f32 := func(x float64) float64 { return float64(float32(x)) }
	agents := []string{"a", "b", "a", "c", "a", "b", "a", "a", "c", "b", "a", "b", "c", "a"}
	var rows []oracleRow
	for i, agent := range agents {
		n := 1 + (i*5)%9
		r := oracleRow{Agent: agent, UID: fmt.Sprintf("g%d", i%3), Adv: f32(rng.NormFloat64() * 1.5)}
		if i == 6 {
			r.Adv = 0
		}
		for range n {
			old := -0.2 - 3*rng.Float64()
			r.Old = append(r.Old, f32(old))
			r.LP = append(r.LP, f32(old+0.35*rng.NormFloat64()))
			r.Ref = append(r.Ref, f32(old+0.5*rng.NormFloat64()))
			r.Behav = append(r.Behav, f32(old+0.4*rng.NormFloat64()))
			r.Ent = append(r.Ent, f32(3*rng.Float64()))
		}
		rows = append(rows, r)
	}
	return rows
}

// objectiveCases are the options checked: each alone, then several together.
func objectiveCases() map[string]oracleOpts {
	base := oracleOpts{ClipLow: 0.2, ClipHigh: 0.28}
	with := func(f func(*oracleOpts)) oracleOpts {
		o := base
		f(&o)
		return o
	}
	return map[string]oracleOpts{
		"default":                 base,
		"seq-mean-token-sum":      with(func(o *oracleOpts) { o.LossAgg = "seq-mean-token-sum" }),
		"seq-mean-token-mean":     with(func(o *oracleOpts) { o.LossAgg = "seq-mean-token-mean" }),
		"seq-mean-token-sum-norm": with(func(o *oracleOpts) { o.LossAgg, o.NormLen = "seq-mean-token-sum-norm", 12 }),
		"clip_c":                  with(func(o *oracleOpts) { o.ClipC = 1.3 }),
		"sequence ratio":          with(func(o *oracleOpts) { o.SeqRatio, o.SeqClipLow, o.SeqClipHigh = true, 3e-4, 4e-4 }),
		"sequence ratio wide": with(func(o *oracleOpts) {
			o.SeqRatio, o.SeqClipLow, o.SeqClipHigh, o.LossAgg = true, 0.1, 0.15, "seq-mean-token-mean"
		}),
		"entropy_coef":          with(func(o *oracleOpts) { o.EntropyCoef = 0.01 }),
		"agent_balance":         with(func(o *oracleOpts) { o.AgentBalance = true }),
		"kl k3":                 with(func(o *oracleOpts) { o.KLCoef = 0.1 }),
		"kl k1":                 with(func(o *oracleOpts) { o.KLCoef, o.KLType = 0.1, "k1" }),
		"kl k2":                 with(func(o *oracleOpts) { o.KLCoef, o.KLType = 0.1, "k2" }),
		"kl abs":                with(func(o *oracleOpts) { o.KLCoef, o.KLType = 0.1, "abs" }),
		"rollout_is token":      with(func(o *oracleOpts) { o.RolloutIS, o.ISCap = "token", 1.5 }),
		"rollout_is sequence":   with(func(o *oracleOpts) { o.RolloutIS, o.ISCap = "sequence", 1.5 }),
		"rollout_is token mask": with(func(o *oracleOpts) { o.RolloutIS, o.ISCap, o.ISMask = "token", 1.5, true }),
		"rollout_is seq mask":   with(func(o *oracleOpts) { o.RolloutIS, o.ISCap, o.ISMask = "sequence", 3, true }),
		"all together": with(func(o *oracleOpts) {
			o.LossAgg, o.ClipC, o.EntropyCoef, o.AgentBalance, o.KLCoef, o.KLType, o.RolloutIS, o.ISCap = "seq-mean-token-mean", 2, 0.02, true, 0.05, "k2", "token", 1.4
		}),
	}
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// hyperOf is the learner's Hyper for o.
func hyperOf(o oracleOpts) learn.Hyper {
	h := learn.Hyper{ClipLow: o.ClipLow, ClipHigh: o.ClipHigh, KLCoef: o.KLCoef, Temperature: 1, MicroBatch: 4}
	h.Objective = learn.Objective{LossAgg: o.LossAgg, NormLen: o.NormLen, ClipC: o.ClipC, SeqRatio: o.SeqRatio,
		SeqClipLow: o.SeqClipLow, SeqClipHigh: o.SeqClipHigh, EntropyCoef: o.EntropyCoef, AgentBalance: o.AgentBalance,
		KLType: o.KLType, RolloutIS: o.RolloutIS, ISCap: o.ISCap, ISMask: o.ISMask}
	return h
}

// TestObjectiveMatchesPyTorch: for every option, the loss and its gradient with respect to each
// token's log-prob and entropy equal an independent PyTorch implementation of verl's
// core_algos.py semantics (testdata/objective_oracle.py) on rows of mixed lengths, agents and
// advantage signs; so do the clip counts. The worst differences are logged.
func TestObjectiveMatchesPyTorch(t *testing.T) {
	py := oracles.Torch(t)
	rows := objectiveRows()
	cases := objectiveCases()
	names := make([]string, 0, len(cases))
	var in []oracleCase
	for name, o := range cases {
		names = append(names, name)
		in = append(in, oracleCase{Opts: o, Rows: rows})
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "testdata/objective_oracle.py")
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v\n%s", err, stderr.String())
	}
	var want []oracleOut
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	exs := make([]learn.Example, len(rows))
	lps, ents := make([][]float32, len(rows)), make([][]float32, len(rows))
	uids := make([]string, len(rows))
	for i, r := range rows {
		exs[i] = learn.Example{Agent: r.Agent, Seq: model.Sequence{Response: make([]int32, len(r.LP))}, Advantage: float32(r.Adv),
			Old: f32s(r.Old), Ref: f32s(r.Ref), Behaviour: f32s(r.Behav)}
		lps[i], ents[i], uids[i] = f32s(r.LP), f32s(r.Ent), r.UID
	}
	learn.BalanceWeights(exs, uids)
	var worstLoss, worstGrad float64
	for k, name := range names {
		loss, d, de, st := learn.ObjectiveTerms(hyperOf(cases[name]), exs, lps, ents)
		w := want[k]
		lossDiff := math.Abs(loss-w.Loss) / math.Max(1, math.Abs(w.Loss))
		worstLoss = math.Max(worstLoss, lossDiff)
		if lossDiff > 1e-12 {
			t.Errorf("%s: loss %.17g, PyTorch %.17g", name, loss, w.Loss)
		}
		var clipped, dual int
		for _, as := range st {
			clipped += as.ClipTokens
			dual += as.DualClipTokens
		}
		var capped, units int
		for _, as := range st {
			capped += as.ISCapped
			units += as.ISUnits
		}
		t.Logf("%s: loss %.6g, %d clipped, %d dual-clipped, %d of %d IS units capped or masked", name, loss, clipped, dual, capped, units)
		if o := cases[name]; (o.ClipC > 0 && dual == 0) || (o.RolloutIS != "" && (capped == 0 || capped == units)) || clipped == 0 {
			t.Errorf("%s: the rows do not exercise the option: %d clipped, %d dual-clipped, %d of %d capped", name, clipped, dual, capped, units)
		}
		if clipped != w.Clipped || dual != w.Dual {
			t.Errorf("%s: %d clipped, %d dual-clipped tokens; PyTorch %d, %d", name, clipped, dual, w.Clipped, w.Dual)
		}
		for i := range rows {
			for tk := range rows[i].LP {
				// float32 gradients: relative to the largest of the case.
				g := float64(d[i][tk])
				var ge float64
				if de[i] != nil {
					ge = float64(de[i][tk])
				}
				for _, p := range [][2]float64{{g, w.D[i][tk]}, {ge, w.DE[i][tk]}} {
					diff := math.Abs(p[0]-p[1]) / math.Max(1e-3, math.Abs(p[1]))
					worstGrad = math.Max(worstGrad, diff)
					if diff > 1e-6 {
						t.Errorf("%s: row %d token %d: gradient %.9g, PyTorch %.9g", name, i, tk, p[0], p[1])
					}
				}
			}
		}
	}
	t.Logf("%d cases: worst loss difference %.3g (relative), worst gradient difference %.3g (relative, floor 1e-3)", len(names), worstLoss, worstGrad)
}
