package checkpoints

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage"
)

// OptimDir is the folder of a step that holds the optimizer states of its Hugging Face models,
// one <model>.safetensors each: outside the model folders, which a server loads as they are
// (vLLM loads every *.safetensors it finds in one).
const OptimDir = "_optim"

// HFModel is a Hugging Face model of a checkpoint step (models.<id>.hf).
type HFModel struct {
	// Base is the base model folder as the config names it (models.<id>.hf): recorded in the
	// step's manifest, and what an adapter names as its base.
	Base string
	// Dir is a local folder holding the model's config.json and tokenizer files: the base's
	// for the warm-up and for any LoRA; a loaded full fine-tune's step copy in the local cache.
	Dir string
	// Config is the model's config.json; its TorchDtype is the dtype Publish writes.
	Config hf.Config
	// Model is what trains: a *model.LLM for a full fine-tune, a *model.LoRA over the base
	// for a LoRA adapter (lora.go).
	Model model.Trainable
	// DropoutSeed is a LoRA's dropout seed (the seed model.NewLoRA was given), recorded with
	// its checkpoint so that a loaded step draws the masks an unbroken run would.
	DropoutSeed uint64
}

// hfFiles writes Hugging Face model name of a step into the empty local folder stage and
// returns its files, named relative to the step: the model folder under <name>/ and the
// optimizer state, if any, as OptimDir/<name>.safetensors (AdamW.SaveState). This is the one
// place the save format is chosen by what trains: a *model.LLM is a full fine-tune, saved by
// hf.WriteLLM as a model folder a server loads as is (config.json, model.safetensors in the
// base's dtype, the tokenizer files and generation_config.json from Dir); a *model.LoRA is
// saved by hf.WriteAdapter as a PEFT adapter folder over Base (lora.go).
func hfFiles(name string, h *HFModel, opt *model.AdamW, stage string) ([]file, error) {
	folder := filepath.Join(stage, "model")
	var err error
	switch m := h.Model.(type) {
	case *model.LLM:
		err = hf.WriteLLM(folder, h.Config, m, "", h.Dir)
	case *model.LoRA:
		err = hf.WriteAdapter(folder, h.Base, m)
	default:
		err = fmt.Errorf("%T has no checkpoint format", h.Model)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	entries, err := os.ReadDir(folder)
	if err != nil {
		return nil, err
	}
	var out []file
	for _, e := range entries {
		f, err := stagedFile(name+"/"+e.Name(), filepath.Join(folder, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if opt != nil {
		local := filepath.Join(stage, "optim.safetensors")
		err := writeLocal(local, opt.SaveState)
		if err != nil {
			return nil, fmt.Errorf("encode optimizer %s: %w", name, err)
		}
		f, err := stagedFile(OptimDir+"/"+name+".safetensors", local)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// stagedFile describes the local file local as the step's file name (size and sha256, read in
// a stream).
func stagedFile(name, local string) (file, error) {
	r, err := os.Open(local)
	if err != nil {
		return file{}, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return file{}, fmt.Errorf("stage %s: %w", name, err)
	}
	return file{name: name, local: local, bytes: n, sha: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeLocal creates name and fills it with fill through a buffer.
func writeLocal(name string, fill func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadHF reads Hugging Face model name from its step folder, copied into the local folder
// dir: the counterpart of hfFiles, choosing by the folder's files (a LoRA adapter is read onto
// its base, see loadLoRA). params are the step manifest's.
func loadHF(ctx context.Context, dir, name string, params map[string]string) (*HFModel, error) {
	base := params[baseParam(name)]
	if _, err := os.Stat(filepath.Join(dir, hf.AdapterConfigFile)); err == nil {
		return loadLoRA(ctx, dir, name, base, params)
	}
	load := hf.LoadLLMContext
	if frozenWeights(ctx) {
		load = hf.LoadFrozenLLM
	}
	m, cfg, err := load(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &HFModel{Base: base, Dir: dir, Config: cfg, Model: m}, nil
}

// baseParam is the manifest parameter that records model name's base folder.
func baseParam(name string) string { return "hf_base." + name }

// CacheDir is the local folder Load copies Hugging Face model name of run's step into:
// <user cache>/drmas/checkpoints/<hash of the store and run>/step=N/<name>. A step is
// immutable once committed, so a copy whose files match the manifest is reused.
func CacheDir(b storage.Bucket, run string, step int64, name string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder for Hugging Face checkpoints (set XDG_CACHE_HOME): %w", err)
	}
	sum := sha256.Sum256([]byte(b.Name() + "\x00" + run))
	return filepath.Join(base, "drmas", "checkpoints", hex.EncodeToString(sum[:8]), FormatStep(step), name), nil
}

// pruneCache removes run's cached step folders whose step is no longer committed in the store
// (retention deleted it): each copy is as large as its weights. A committed step's copy
// stays, so no load of a step that exists races with the removal.
func pruneCache(ctx context.Context, b storage.Bucket, run string) error {
	probe, err := CacheDir(b, run, 0, "x")
	if err != nil {
		return err
	}
	root := filepath.Dir(filepath.Dir(probe))
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil // nothing cached
	}
	steps, err := Steps(ctx, b, run)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if s, ok := layout.ParseStepDir(e.Name()); ok && e.Name() == FormatStep(s) && !slices.Contains(steps, s) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return fmt.Errorf("checkpoint cache: %w", err)
			}
		}
	}
	return nil
}

// hfEntry is one Hugging Face model of a step's manifest: its folder's files and its optimizer.
type hfEntry struct {
	files []commit.File // names relative to the step
	optim *commit.File
}

// hfEntries returns the Hugging Face models of a manifest (a folder with a config.json, or
// an adapter_config.json for a LoRA) by name.
func hfEntries(m *commit.Manifest) map[string]*hfEntry {
	out := map[string]*hfEntry{}
	for _, f := range m.Files {
		name, file, ok := strings.Cut(f.Name, "/")
		if ok && name != OptimDir && (file == hf.ConfigFile || file == hf.AdapterConfigFile) {
			out[name] = &hfEntry{}
		}
	}
	for _, f := range m.Files {
		name, file, _ := strings.Cut(f.Name, "/")
		if e := out[name]; e != nil {
			e.files = append(e.files, f)
		}
		if n, ok := strings.CutSuffix(file, ".safetensors"); ok && name == OptimDir && out[n] != nil {
			out[n].optim = &f
		}
	}
	return out
}

// loadHFStep loads the Hugging Face models of a step into s: each model folder is copied into
// its CacheDir (sha256-verified against the manifest; files already there with the right
// content are kept), then read from there.
func loadHFStep(ctx context.Context, b storage.Bucket, run, dir string, m *commit.Manifest, s *Set, withOptim bool) error {
	entries := hfEntries(m)
	if len(entries) == 0 {
		return nil
	}
	if err := pruneCache(ctx, b, run); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		local, err := CacheDir(b, run, s.Step, name)
		if err != nil {
			return err
		}
		if err := syncFolder(ctx, b, dir, name, e.files, local); err != nil {
			return err
		}
		h, err := loadHF(ctx, local, name, m.Params)
		if err != nil {
			return fmt.Errorf("%s: %w", path.Join(dir, name), err)
		}
		s.hf()[name] = h
		if withOptim && e.optim != nil {
			o, err := loadOptim(ctx, b, dir, *e.optim, filepath.Join(filepath.Dir(local), OptimDir), h.Model)
			if err != nil {
				return err
			}
			s.Optims[name] = o
		}
	}
	return nil
}

// syncFolder makes local hold exactly the files of model name's step folder: a file whose
// sha256 already matches is kept, others are read (verified) and renamed into place, and files
// the folder does not list are removed.
func syncFolder(ctx context.Context, b storage.Bucket, dir, name string, files []commit.File, local string) error {
	if err := os.MkdirAll(local, 0o755); err != nil {
		return fmt.Errorf("checkpoint cache: %w", err)
	}
	want := map[string]bool{}
	for _, f := range files {
		base := strings.TrimPrefix(f.Name, name+"/")
		if strings.Contains(base, "/") || base == "" {
			return fmt.Errorf("%s: %s is not a file of a model folder", dir, f.Name)
		}
		want[base] = true
		dst := filepath.Join(local, base)
		if commit.LocalMatches(dst, f) {
			continue
		}
		if err := commit.ReadFileTo(ctx, b, dir, f, dst); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(local)
	if err != nil {
		return fmt.Errorf("checkpoint cache: %w", err)
	}
	for _, e := range entries {
		if !want[e.Name()] && !strings.HasPrefix(e.Name(), ".tmp-") { // another loader's file in flight
			if err := os.RemoveAll(filepath.Join(local, e.Name())); err != nil {
				return fmt.Errorf("checkpoint cache: %w", err)
			}
		}
	}
	return nil
}

// errNoModel is LoadStep's error for a step without any model.
var errNoModel = errors.New("checkpoint has no model")

// loadOptim reads a Hugging Face model's optimizer state: downloaded (verified) into the
// cache folder cache, then read one tensor at a time from there, never whole into memory.
func loadOptim(ctx context.Context, b storage.Bucket, dir string, f commit.File, cache string, m model.Trainable) (*model.AdamW, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint cache: %w", err)
	}
	local := filepath.Join(cache, path.Base(f.Name))
	if !commit.LocalMatches(local, f) {
		if err := commit.ReadFileTo(ctx, b, dir, f, local); err != nil {
			return nil, err
		}
	}
	fh, err := os.Open(local)
	if err != nil {
		return nil, fmt.Errorf("checkpoint cache: %w", err)
	}
	defer fh.Close()
	o := m.NewOptimizer(model.DefaultAdamWConfig())
	if err := o.LoadState(fh, f.Bytes); err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, f.Name), err)
	}
	return o, nil
}
