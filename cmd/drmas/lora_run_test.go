package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// warmBaseConfig fine-tunes the tiny random model in full on the workflow's demonstrations
// (warm-up only): its step 0 stands in for an instruct model, which the LoRA runs start from;
// %s is the random model's folder.
const warmBaseConfig = `run: full
seed: 3
workflow: {name: math, max_loop: 2}
models:
  m: {hf: %s}
agents:
  solver: {model: m}
  verifier: {model: m}
rollout: {max_tokens: 16}
warmup: {steps: 60, batch: 4, demos: 8, lr: 2.0e-2}
learn: {micro_batch: 2}
`

// loraRunConfig is a math run with a LoRA adapter per agent's model (the solver's with
// dropout, the verifier's on three modules), each agent its own learning rate; %[1]s is the
// base folder, %[2]s the run.
const loraRunConfig = `run: %[2]s
seed: 3
iterations: 2
workflow: {name: math, max_loop: 2}
models:
  solver_m: {hf: %[1]s, lora: {r: 4, dropout: 0.1}}
  verifier_m: {hf: %[1]s, lora: {r: 4, alpha: 16, target_modules: [q_proj, v_proj, down_proj]}}
agents:
  solver: {model: solver_m, lr: 2.0e-2}
  verifier: {model: verifier_m, lr: 5.0e-3}
tasks: {per_iteration: 2, eval_size: 2}
rollout: {group_size: 4, parts: 1, max_tokens: 16}
warmup: {steps: 6, batch: 4, demos: 8, lr: 1.0e-2}
evaluate: {every: 1, k: 1, top_p: 1.0}
learn: {micro_batch: 2, keep_checkpoints: 3}
`

// folderBytes is the total size of the files in dir.
func folderBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

// TestRunLoRAModels is the end-to-end smoke of Hugging Face models trained as LoRA adapters,
// in process: a tiny random Qwen3 with the real Qwen3 tokenizer; `drmas run --iters 2` with a
// LoRA per agent's model. The base folder is untouched; every step folder is a PEFT adapter
// folder (adapter_config.json and adapter_model.safetensors with PEFT's names and shapes,
// nothing else) with the optimizer outside it; only the adapters moved; `drmas model score` on
// a step folder in the store equals the in-process score of the loaded LoRA; and a run of one
// iteration resumed for a second publishes the same adapter bytes as the run of two.
func TestRunLoRAModels(t *testing.T) {
	tok := oracles.Qwen3TokenizerDir(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tmp := t.TempDir()
	random := filepath.Join(tmp, "random")
	if _, _, err := execute(t, "model", "init", "--arch", "qwen3", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
		"--head-dim", "16", "--intermediate", "64", "--max-positions", "2048", "--tokenizer", tok, "--seed", "1", "--out", random); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "store")
	cfgFile := filepath.Join(tmp, "full.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, warmBaseConfig, random), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run-stage", "warmup"); err != nil {
		t.Fatalf("warm up the base: %v\n%s\n%s", err, out, errOut)
	}
	// The base is a folder in a store (the full run's step 0), fetched into the cache.
	baseDir := filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("full", 0)), "m")
	base := "file://" + filepath.ToSlash(baseDir)
	baseDigest := folderDigests(t, baseDir)
	run := func(name string, iters int) {
		cfgFile := filepath.Join(tmp, name+".yaml")
		if err := os.WriteFile(cfgFile, fmt.Appendf(nil, loraRunConfig, base, name), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := execute(t, "--config", cfgFile, "--store", store, "run", "--iters", strconv.Itoa(iters))
		if err != nil {
			t.Fatalf("run %s: %v\n%s\n%s", name, err, out, errOut)
		}
	}
	run("lora", 2)
	if !maps.Equal(folderDigests(t, baseDir), baseDigest) {
		t.Fatal("the run changed the base folder")
	}
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := checkpoints.Steps(ctx, b, "lora")
	if err != nil || !slices.Equal(steps, []int64{0, 1, 2}) {
		t.Fatalf("steps %v %v, want 0..2", steps, err)
	}
	stepDir := func(run string, step int64, id string) string {
		return filepath.Join(store, filepath.FromSlash(layout.CheckpointDir(run, step)), id)
	}
	targets := map[string][]string{"solver_m": configsLoRATargets(), "verifier_m": {"q_proj", "v_proj", "down_proj"}}
	for _, id := range []string{"solver_m", "verifier_m"} {
		for _, step := range steps {
			checkPEFTFolder(t, stepDir("lora", step, id), base, targets[id])
		}
		if _, err := os.Stat(filepath.Join(store, filepath.FromSlash(layout.CheckpointDir("lora", 2)), checkpoints.OptimDir, id+".safetensors")); err != nil {
			t.Errorf("optimizer of %s: %v", id, err)
		}
	}
	set, err := checkpoints.LoadStep(ctx, b, "lora", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	set0, err := checkpoints.LoadStep(ctx, b, "lora", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	baseLLM, baseCfg, err := hf.LoadLLM(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"solver_m", "verifier_m"} {
		l, ok := set.HF[id].Model.(*model.LoRA)
		l0, ok0 := set0.HF[id].Model.(*model.LoRA)
		if !ok || !ok0 || set.Optims[id] == nil {
			t.Fatalf("%s: step 2 holds a %T (optimizer %v), step 0 a %T", id, set.HF[id].Model, set.Optims[id] != nil, set0.HF[id].Model)
		}
		// Only the adapter trains: the base under it is the base folder's, B moved from 0 in
		// the warm-up and the adapter moved again in RL.
		// A BF16 base folder's matrices stay BF16 under the adapter (hf.LoadFrozenLLM).
		for i, p := range l.Base().Params() {
			if !slices.Equal(p.Float32(), baseLLM.Params()[i].Data) {
				t.Errorf("%s: base tensor %s differs from the base folder's", id, p.Name)
			}
		}
		if got, want := l.Base().StoredBF16(), baseCfg.TorchDtype == "bfloat16"; got != want {
			t.Errorf("%s: base stored in BF16 %v, want %v (the folder is %s)", id, got, want, baseCfg.TorchDtype)
		}
		if d := adapterDistance(l0, nil); d == 0 {
			t.Errorf("%s: the warm-up left B = 0", id)
		}
		if d := adapterDistance(l, l0); d == 0 {
			t.Errorf("%s: RL did not move the adapter from step 0 to step 2", id)
		}
		// model score on the step folder in the store (its base named by the adapter) equals the
		// in-process score of the loaded LoRA, unmerged.
		scoresAsInProcess(t, l, "file://"+filepath.ToSlash(stepDir("lora", 2, id)), filepath.Join(tmp, "cache-"+id), id+": the in-process LoRA")
	}
	// Resume: one iteration, then a second in another process's worth of state (everything is
	// reloaded from the store), gives the bytes of the unbroken run.
	run("resumed", 1)
	run("resumed", 2)
	for _, id := range []string{"solver_m", "verifier_m"} {
		a, _ := os.ReadFile(filepath.Join(stepDir("lora", 2, id), hf.AdapterWeightsFile))
		c, err := os.ReadFile(filepath.Join(stepDir("resumed", 2, id), hf.AdapterWeightsFile))
		if err != nil || commit.Digest(a) != commit.Digest(c) {
			t.Errorf("%s: step 2 of the resumed run differs from the unbroken run's (%v)", id, err)
		}
	}
	// Size: the LoRA step folder against the full fine-tune's step folder of the same model.
	loraBytes, fullBytes := folderBytes(t, stepDir("lora", 2, "solver_m")), folderBytes(t, baseDir)
	fullWeights, err := os.Stat(filepath.Join(baseDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step folder of solver_m (r 4, every linear layer): LoRA %d bytes; full fine-tune %d bytes (%d of weights, the rest config and tokenizer files)",
		loraBytes, fullBytes, fullWeights.Size())
	if loraBytes >= fullWeights.Size() {
		t.Errorf("the LoRA step folder (%d bytes) is not smaller than the full weights (%d)", loraBytes, fullWeights.Size())
	}
}

// configsLoRATargets is the default target_modules, in PEFT's spelling.
func configsLoRATargets() []string {
	return []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
}

// checkPEFTFolder checks that dir is a PEFT LoRA folder over base with the targets, r 4 and
// nothing but the adapter's two files.
func checkPEFTFolder(t *testing.T, dir, base string, targets []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{hf.AdapterConfigFile, hf.AdapterWeightsFile}) {
		t.Fatalf("%s holds %v, want the adapter's two files only", dir, names)
	}
	data, err := os.ReadFile(filepath.Join(dir, hf.AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var ac struct {
		PeftType string   `json:"peft_type"`
		R        int      `json:"r"`
		Alpha    float64  `json:"lora_alpha"`
		Targets  []string `json:"target_modules"`
		Base     string   `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(data, &ac); err != nil {
		t.Fatal(err)
	}
	if ac.PeftType != "LORA" || ac.R != 4 || ac.Alpha == 0 || ac.Base != base || !slices.Equal(ac.Targets, targets) {
		t.Errorf("%s: adapter_config.json %+v", dir, ac)
	}
	// The safetensors header by hand: PEFT's names and A [r, in], B [out, r].
	raw, err := os.ReadFile(filepath.Join(dir, hf.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	n := int(raw[0]) | int(raw[1])<<8 | int(raw[2])<<16 | int(raw[3])<<24
	var header map[string]struct {
		Dtype string `json:"dtype"`
		Shape []int  `json:"shape"`
	}
	if err := json.Unmarshal(raw[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	a := header["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
	bq := header["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
	// q_proj of the tiny Qwen3: in = hidden 32, out = heads 2 × head_dim 16 = 32.
	if !slices.Equal(a.Shape, []int{4, 32}) || !slices.Equal(bq.Shape, []int{32, 4}) || a.Dtype != "F32" {
		t.Errorf("%s: q_proj lora_A %v %s, lora_B %v", dir, a.Shape, a.Dtype, bq.Shape)
	}
	if d := header["base_model.model.model.layers.0.mlp.down_proj.lora_A.weight"]; !slices.Equal(d.Shape, []int{4, 64}) {
		t.Errorf("%s: down_proj lora_A %v, want [4 64] (in = intermediate 64)", dir, d.Shape)
	}
	delete(header, "__metadata__")
	if len(header) != 2*len(targets) { // one layer
		t.Errorf("%s: %d tensors, want %d", dir, len(header), 2*len(targets))
	}
}

// adapterDistance is the squared distance of l's adapter from o's (from zero B when o is nil:
// the B half only).
func adapterDistance(l, o *model.LoRA) float64 {
	var d float64
	for i, p := range l.Params() {
		if o == nil && !strings.HasSuffix(p.Name, "lora_B.weight") {
			continue
		}
		for j, v := range p.Data {
			w := float32(0)
			if o != nil {
				w = o.Params()[i].Data[j]
			}
			d += math.Pow(float64(v-w), 2)
		}
	}
	return d
}

// folderDigests is the sha256 of every file of dir by name.
func folderDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = commit.Digest(data)
	}
	return out
}
