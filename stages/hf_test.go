package stages_test

import (
	"context"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestCheckHFMemory: a Qwen2.5-0.5B shape does not train in full under a 1 GiB limit (its
// float32 weights, gradients and moments alone are 16 bytes × 494 M parameters), and the
// refusal gives the figure and what to change; under a large limit it passes.
func TestCheckHFMemory(t *testing.T) {
	hc, err := hf.NewConfig(hf.InitSpec{Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, Intermediate: 4864, Vocab: 151936})
	if err != nil {
		t.Fatal(err)
	}
	cfg := stagetest.Config(t, "math")
	cfg.Models = map[string]configs.Model{"q": {HF: "/models/q"}}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "q", MicroBatch: 2}, "verifier": {Model: "q", MicroBatch: 2}}
	need := stages.HFStepMemory(cfg, "q", hc)
	old := debug.SetMemoryLimit(1 << 30)
	defer debug.SetMemoryLimit(old)
	if w := 16 * hc.Params(); need <= w || hc.Params() < 490e6 {
		t.Fatalf("estimate %d for %d parameters: not above the %d bytes of weights, gradients and moments", need, hc.Params(), w)
	}
	err = stages.CheckHFMemory(cfg, "q", hc)
	if err == nil {
		t.Fatal("a 0.5B full fine-tune passed under 1 GiB")
	}
	one := stages.HFStep(cfg, "q", hc, 1).Total()
	for _, want := range []string{configs.Bytes(float64(one)), "GOMEMLIMIT", "models.q.lora", "rollout.max_tokens", "a micro-batch of 1 sequence"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// A LoRA adapter keeps 4 bytes a frozen weight: 2 GB does not fit 1 GiB either, and the
	// advice is now the rank.
	cfg.Models["q"] = configs.Model{HF: "/models/q", LoRA: &configs.LoRA{R: 8}}
	lora := stages.HFStepMemory(cfg, "q", hc)
	if lora >= need || lora <= 4*hc.Params() {
		t.Errorf("LoRA estimate %d, full %d, frozen weights %d", lora, need, 4*hc.Params())
	}
	if err := stages.CheckHFMemory(cfg, "q", hc); err == nil || !strings.Contains(err.Error(), "lower models.q.lora.r") || !strings.Contains(err.Error(), configs.Bytes(float64(stages.HFStep(cfg, "q", hc, 1).Total()))) {
		t.Errorf("LoRA refusal: %v", err)
	}
	debug.SetMemoryLimit(1 << 50)
	if err := stages.CheckHFMemory(cfg, "q", hc); err != nil {
		t.Errorf("refused under 1 PiB: %v", err)
	}
}

// TestLocalHFBackend: the backend of an HF model of a step samples it in process with the
// model's tokenizer, stops at the tokens it is given, and names what to change when a prompt
// does not fit the context.
func TestLocalHFBackend(t *testing.T) {
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "q"), hftest.TinyTokenizer(), 1)
	m, hc, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stagetest.Config(t, "math")
	cfg.Models = map[string]configs.Model{"q": {HF: base}}
	cfg.Agents = map[string]configs.Agent{"solver": {Model: "q"}, "verifier": {Model: "q"}}
	set := &checkpoints.Set{Step: 4, HF: map[string]*checkpoints.HFModel{"q": {Base: base, Dir: base, Config: hc, Model: m}}}
	bes, err := stages.Backends(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	be := bes["solver"]
	if be != bes["verifier"] || be.Version() != 4 {
		t.Fatalf("agents of one model got %v and %v", be, bes["verifier"])
	}
	tok, ok := actors.TokenizerOf(be).(actors.Chat)
	if !ok || tok.BPE.EOS() != 266 {
		t.Fatalf("tokenizer %T, want the model's chat tokenizer ending turns at <|im_end|> 266", actors.TokenizerOf(be))
	}
	ctx := context.Background()
	// Every id stops: each response is one token, finished by "stop".
	stop := make([]int32, hc.Vocab)
	for i := range stop {
		stop[i] = int32(i)
	}
	local := actors.NewLocalHF("q", 4, m, hc.ArchConfig().Context, tok, stop, base)
	res, err := local.Generate(ctx, []actors.Request{{Agent: "solver", Prompt: []int32{1, 2, 3}, Seed: 9}}, actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 5})
	if err != nil || len(res[0].Tokens) != 1 || res[0].FinishReason != model.FinishStop || len(res[0].LogProbs) != 1 {
		t.Fatalf("got %+v %v, want one token finished by stop", res, err)
	}
	long := make([]int32, hc.ArchConfig().Context)
	_, err = be.Generate(ctx, []actors.Request{{Agent: "solver", Prompt: long}}, actors.Sampling{MaxTokens: 1})
	if err == nil || !strings.Contains(err.Error(), "max_position_embeddings in "+base+"/config.json") {
		t.Fatalf("over-long prompt: %v", err)
	}
	// A step without the model is an error naming what it has.
	if _, err := stages.Backends(cfg, &checkpoints.Set{Step: 4}); err == nil || !strings.Contains(err.Error(), `no Hugging Face model "q"`) {
		t.Fatalf("missing model: %v", err)
	}
}
