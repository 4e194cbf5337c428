package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/model"
)

// TestModelScoreLoRAFolder: `model score --model` on a PEFT adapter folder scores its base
// (from base_model_name_or_path, or --base) with the adapter unmerged, bit for bit as the
// in-process LoRA; --adapter merges as before (within float32 rounding of the unmerged
// score); mixed-up flags are refused in one line.
func TestModelScoreLoRAFolder(t *testing.T) {
	tmp := t.TempDir()
	base := hftest.TinyHF(t, filepath.Join(tmp, "base"), hftest.TinyTokenizer(), 5)
	m, _, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	l, err := model.NewLoRA(m, model.LoRAConfig{R: 3, Alpha: 6, Targets: []string{"q_proj", "o_proj", "gate_proj"}}, 9)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, p := range l.Params() {
		for i := range p.Data {
			p.Data[i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	adapter := filepath.Join(tmp, "adapter")
	if err := hf.WriteAdapter(adapter, base, l); err != nil {
		t.Fatal(err)
	}
	hub := filepath.Join(tmp, "hub-adapter") // names its base by a Hub id, not a folder
	if err := hf.WriteAdapter(hub, "Qwen/Qwen3-4B", l); err != nil {
		t.Fatal(err)
	}
	j := scoreJob{Prompt: []int32{7, 100, 250, 3}, Response: []int32{66, 2, 199}}
	lp, _, err := l.Score([]model.Sequence{{Prompt: j.Prompt, Response: j.Response}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got []float64, tol float64) {
		t.Helper()
		for i, v := range got {
			exact := float32(v) == lp[0][i] // the printed decimal reads back to the float32
			if d := math.Abs(v - float64(lp[0][i])); (tol == 0 && !exact) || (tol > 0 && d > tol) {
				t.Errorf("%s: token %d: %v, the in-process LoRA %v", what, i, v, lp[0][i])
			}
		}
	}
	same("--model ADAPTER", runScore(t, adapter, j), 0)
	same("--model ADAPTER --base BASE", runScore(t, hub, j, "--base", base), 0)
	same("--model BASE --adapter ADAPTER (merged)", runScore(t, base, j, "--adapter", adapter), 1e-4)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", hub}, "give it as --base"},
		{[]string{"--model", adapter, "--adapter", adapter}, "is a LoRA adapter folder"},
		{[]string{"--model", base, "--base", base}, "--base is for a LoRA adapter folder"},
	} {
		args := append([]string{"model", "score", "--prompt-ids", joinIDs(j.Prompt), "--response-ids", joinIDs(j.Response)}, c.args...)
		if _, _, err := execute(t, args...); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}
