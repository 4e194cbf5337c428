package checkpoints_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/hftest"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// loraSeqs are a few token sequences of the tiny tokenizer's vocabulary.
var loraSeqs = []model.Sequence{
	{Prompt: []int32{5, 17, 99}, Response: []int32{3, 200, 41}},
	{Prompt: []int32{250, 8}, Response: []int32{12, 12, 7, 60}},
}

// loraStep is one SFT step of l: token-mean cross-entropy on loraSeqs, AdamW.
func loraStep(t *testing.T, l *model.LoRA, opt *model.AdamW) {
	t.Helper()
	pass, err := l.TrainForward(loraSeqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	lp := pass.LogProbs()
	n := 0
	for _, v := range lp {
		n += len(v)
	}
	d := make([][]float32, len(lp))
	for i, v := range lp {
		d[i] = make([]float32, len(v))
		for j := range d[i] {
			d[i][j] = -1 / float32(n)
		}
	}
	g := l.NewGradBuf()
	if err := pass.Backward(d, nil, g); err != nil {
		t.Fatal(err)
	}
	if err := opt.Apply(g); err != nil {
		t.Fatal(err)
	}
}

// adapterBits returns every float of l's adapter as its bits, in Params order.
func adapterBits(l *model.LoRA) []uint32 {
	var out []uint32
	for _, p := range l.Params() {
		for _, v := range p.Data {
			out = append(out, math.Float32bits(v))
		}
	}
	return out
}

// TestPublishLoadLoRA: a LoRA model's step folder is a PEFT adapter alone (adapter_config.json
// naming the base as the config names it, adapter_model.safetensors), its optimizer is under
// _optim/; loading reads the adapter onto the base that a BaseResolver gives (a store URL
// here), and a training step after the load — with dropout, so the masks depend on the seed
// and the number of passes restored — gives the same adapter bits as a step of the model that
// was published. Without a resolver, a store base that is not in the cache is refused.
func TestPublishLoadLoRA(t *testing.T) {
	ctx := context.Background()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "base"), hftest.TinyTokenizer(), 3)
	m, cfg, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	const seed = 77
	l, err := model.NewLoRA(m, model.LoRAConfig{R: 4, Alpha: 8, Dropout: 0.25, Targets: []string{"q_proj", "v_proj", "down_proj"}}, seed)
	if err != nil {
		t.Fatal(err)
	}
	opt := l.NewOptimizer(model.DefaultAdamWConfig())
	for range 2 {
		loraStep(t, l, opt)
	}
	const url = "s3://models/base"
	s := &checkpoints.Set{Step: 1, Parent: 0, Models: map[string]*model.Model{}, Optims: map[string]*model.AdamW{"q": opt},
		HF: map[string]*checkpoints.HFModel{"q": {Base: url, Dir: base, Config: cfg, Model: l, DropoutSeed: seed}}}
	root := t.TempDir()
	b, err := filestore.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.Publish(ctx, b, "r", s, "d"); err != nil {
		t.Fatal(err)
	}
	dir := layout.CheckpointDir("r", 1)
	man, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range man.Files {
		names = append(names, f.Name)
	}
	if want := []string{"_optim/q.safetensors", "q/adapter_config.json", "q/adapter_model.safetensors"}; !slices.Equal(names, want) {
		t.Fatalf("step files %v, want %v", names, want)
	}
	if man.Params["hf_base.q"] != url || man.Params["lora_dropout_seed.q"] != "77" || man.Params["lora_training_passes.q"] != "2" {
		t.Errorf("manifest params %v", man.Params)
	}
	folder := filepath.Join(root, filepath.FromSlash(dir), "q")
	var ac map[string]any
	data, err := os.ReadFile(filepath.Join(folder, hf.AdapterConfigFile))
	if err != nil || json.Unmarshal(data, &ac) != nil {
		t.Fatalf("adapter_config.json: %v", err)
	}
	if ac["base_model_name_or_path"] != url || ac["peft_type"] != "LORA" || ac["r"] != 4.0 || ac["lora_alpha"] != 8.0 {
		t.Errorf("adapter_config.json %v", ac)
	}

	_, err = checkpoints.LoadStep(ctx, b, "r", 1, true)
	if !errors.Is(err, checkpoints.ErrBaseNotLocal) || !strings.Contains(err.Error(), url) {
		t.Fatalf("a store base without a resolver or a cached copy: %v", err)
	}
	var asked []string
	rctx := checkpoints.WithBaseResolver(ctx, func(_ context.Context, b string) (string, error) {
		asked = append(asked, b)
		return base, nil
	})
	got, err := checkpoints.LoadStep(rctx, b, "r", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	h := got.HF["q"]
	l2, ok := h.Model.(*model.LoRA)
	if !ok || !slices.Equal(asked, []string{url}) || h.Dir != base || h.Base != url || h.DropoutSeed != seed {
		t.Fatalf("loaded %T from %q (resolver asked %v), seed %d", h.Model, h.Dir, asked, h.DropoutSeed)
	}
	if l2.TrainingPasses() != 2 || !slices.Equal(adapterBits(l2), adapterBits(l)) {
		t.Fatalf("loaded adapter: %d passes, same bits %v", l2.TrainingPasses(), slices.Equal(adapterBits(l2), adapterBits(l)))
	}
	opt2 := got.Optims["q"]
	opt2.LR, opt.LR = 1e-2, 1e-2
	loraStep(t, l, opt)
	loraStep(t, l2, opt2)
	if !slices.Equal(adapterBits(l2), adapterBits(l)) {
		t.Error("a training step after the load differs from one of the published model")
	}
	// The base's weights are not in the step, and were not changed by training.
	want, _, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range want.Params() {
		if !slices.Equal(p.Data, m.Params()[i].Data) {
			t.Fatalf("base tensor %s changed", p.Name)
		}
	}
}
