package stages_test

import (
	"context"
	"path/filepath"
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
