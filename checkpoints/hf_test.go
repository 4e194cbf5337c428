package checkpoints_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path"
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

// hfSet returns step 1 of a set with a built-in model m1 and a tiny Qwen3 q trained one AdamW
// step (so its weights are not BF16 values and its moments are not zero), with q's base folder.
func hfSet(t *testing.T) (*checkpoints.Set, string) {
	t.Helper()
	base := hftest.TinyHF(t, filepath.Join(t.TempDir(), "base"), hftest.TinyTokenizer(), 3)
	if err := os.WriteFile(filepath.Join(base, "generation_config.json"), []byte(`{"eos_token_id": 266}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, cfg, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	opt := m.NewOptimizer(model.DefaultAdamWConfig())
	g := m.NewGradBuf()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range g.Flat() {
		g.Flat()[i] = float32(rng.NormFloat64())
	}
	if err := opt.Apply(g); err != nil {
		t.Fatal(err)
	}
	s := newSet(t, 1, 1)
	s.HF = map[string]*checkpoints.HFModel{"q": {Base: "s3://models/base", Dir: base, Config: cfg, Model: m}}
	s.Optims["q"] = opt
	return s, base
}

// publishHF publishes hfSet as step 1 of run "r" in a new folder store (root), with a cache of
// its own.
func publishHF(t *testing.T) (b *filestore.Bucket, root string, s *checkpoints.Set, base string) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	root = t.TempDir()
	b, err := filestore.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s, base = hfSet(t)
	if _, err := checkpoints.Publish(context.Background(), b, "r", s, "d"); err != nil {
		t.Fatal(err)
	}
	return b, root, s, base
}

// TestPublishLoadHF: a Hugging Face model's step folder is an HF folder a server loads as it
// is (config.json, BF16 weights as the base stores them, tokenizer and generation config), its
// optimizer state lives outside it under _optim/, and both load back: the weights as their
// BF16 rounding, the moments exactly. Republishing what was loaded is a no-op.
func TestPublishLoadHF(t *testing.T) {
	ctx := context.Background()
	b, root, s, base := publishHF(t)
	dir := layout.CheckpointDir("r", 1)
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	want := []string{"_optim/q.safetensors", "m1/model.safetensors", "m1/optim.safetensors", "q/config.json", "q/generation_config.json",
		"q/model.safetensors", "q/tokenizer.json", "q/tokenizer_config.json"}
	if !slices.Equal(names, want) {
		t.Errorf("manifest files %v, want %v", names, want)
	}
	if m.Params["hf_base.q"] != "s3://models/base" {
		t.Errorf("manifest params %v lack the base", m.Params)
	}
	// The folder in the store is what a server loads: hf reads it as it is.
	folder := filepath.Join(root, filepath.FromSlash(dir), "q")
	w, err := hf.OpenWeights(folder)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Dtypes(); !slices.Equal(got, []string{hf.BF16}) {
		t.Errorf("step folder dtypes %v, want the base's BF16", got)
	}
	w.Close()
	for _, f := range []string{"tokenizer.json", "generation_config.json"} {
		a, _ := os.ReadFile(filepath.Join(base, f))
		c, _ := os.ReadFile(filepath.Join(folder, f))
		if len(a) == 0 || string(a) != string(c) {
			t.Errorf("%s differs from the base's", f)
		}
	}

	got, err := checkpoints.LoadStep(ctx, b, "r", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.ModelNames(), []string{"m1", "q"}) || got.Models["m1"] == nil {
		t.Fatalf("loaded models %v", got.ModelNames())
	}
	h := got.HF["q"]
	if h.Base != "s3://models/base" || h.Config.TorchDtype != "bfloat16" {
		t.Errorf("loaded base %q dtype %q", h.Base, h.Config.TorchDtype)
	}
	src, dst := s.HF["q"].Model.(*model.LLM).Params(), h.Model.(*model.LLM).Params()
	for i, p := range src {
		for j, v := range p.Data {
			if r := hf.Float32FromBF16(hf.BF16FromFloat32(v)); dst[i].Data[j] != r {
				t.Fatalf("%s[%d] = %v, want %v, the BF16 rounding of %v", p.Name, j, dst[i].Data[j], r, v)
			}
		}
	}
	om, ov := s.Optims["q"].Moments()
	lm, lv := got.Optims["q"].Moments()
	if !slices.Equal(om, lm) || !slices.Equal(ov, lv) || got.Optims["q"].Steps != 1 {
		t.Error("optimizer state did not load back exactly")
	}
	// What was loaded publishes the same bytes: the republish is a no-op.
	got.ManifestSHA256 = ""
	if _, err := checkpoints.Publish(ctx, b, "r", got, "d"); err != nil {
		t.Fatalf("republishing the loaded step: %v", err)
	}

	// A damaged cached copy is repaired from the store on the next load.
	if err := os.WriteFile(filepath.Join(h.Dir, hf.SingleFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.LoadStep(ctx, b, "r", 1, false); err != nil {
		t.Fatalf("reload over a damaged cache: %v", err)
	}

	// Once a step is no longer committed (retention), loading another drops its cached copy.
	got.Step, got.Parent = 2, 1
	if _, err := checkpoints.Publish(ctx, b, "r", got, "d"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.LoadStep(ctx, b, "r", 2, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.Dir); !os.IsNotExist(err) {
		t.Errorf("the cached copy of deleted step 1 is still there: %v", err)
	}
}

// TestLoadHFDamaged: a step whose model file does not match its manifest does not load.
func TestLoadHFDamaged(t *testing.T) {
	ctx := context.Background()
	b, root, _, _ := publishHF(t)
	key := filepath.Join(root, filepath.FromSlash(layout.CheckpointDir("r", 1)), "q", "config.json")
	if err := os.WriteFile(key, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.LoadStep(ctx, b, "r", 1, false); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("a damaged config.json loaded: %v", err)
	}
}

// TestLoadFrozenHF: under WithFrozenWeights a full model's BF16 step folder loads with its
// matrices stored in BF16 (a KL reference), holding the plain load's values; without it the
// model is float32.
func TestLoadFrozenHF(t *testing.T) {
	ctx := context.Background()
	b, _, _, _ := publishHF(t)
	plain, err := checkpoints.LoadStep(ctx, b, "r", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := checkpoints.LoadStep(checkpoints.WithFrozenWeights(ctx), b, "r", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	pm, fm := plain.HF["q"].Model.(*model.LLM), frozen.HF["q"].Model.(*model.LLM)
	if pm.StoredBF16() || !fm.StoredBF16() {
		t.Fatalf("stored in BF16: plain load %v, frozen load %v", pm.StoredBF16(), fm.StoredBF16())
	}
	for i, p := range fm.Params() {
		if !slices.Equal(p.Float32(), pm.Params()[i].Data) {
			t.Errorf("%s: the frozen load's values differ from the plain load's", p.Name)
		}
	}
}
