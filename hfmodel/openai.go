package hfmodel

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/layout"
)

// OpenAIBackend builds the openai backend of Hugging Face model id, which samples checkpoint
// set on a server hosting its base (vLLM, SGLang, drmas serve --hf): prompts are encoded with
// the model's own chat tokenizer and a sample ends at its end of turn, as in process. The
// server samples with the weights of set.Step: a LoRA model's adapter folder of that step
// loaded as "<model>@step=N" (openai.Options.LoRAPath), a model trained in full reloaded from
// its step folder (models.<id>.openai.reload: sglang; openai.Options.ReloadPath). A model
// trained in full without reload is refused: the server would sample with other weights than
// the step the rows record.
func (env *Env) OpenAIBackend(id string, set *checkpoints.Set) (actors.Backend, error) {
	cfg := env.Config
	m := cfg.Models[id]
	if m.LoRA == nil && m.OpenAI.Reload == "" {
		return nil, fmt.Errorf("model %s is a Hugging Face model trained in full on backend openai: the server would not sample with checkpoint step %d's weights; set models.%s.openai.reload: sglang (SGLang and drmas serve --hf reload each step's folder), train a LoRA adapter (models.%s.lora: the server loads each step's adapter), or use backend: local (for vLLM, restart it on each step's folder, or use its sleep mode's reload_weights, and sample with backend: local)",
			id, set.Step, id, id)
	}
	dir, hc, err := env.tokenizerFolder(id, set)
	if err != nil {
		return nil, err
	}
	tok, stop, err := ChatTokenizer(dir, hc, m.ChatDate)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", id, err)
	}
	o, err := openai.OptionsFromConfig(id, m, openai.Checkpoint{Run: cfg.Run, Step: set.Step, SHA256: set.ManifestSHA256}, cfg.Seed, os.LookupEnv, env.Logf)
	if err != nil {
		return nil, err
	}
	o.Tokenizer, o.StopTokenIDs = tok, stop
	folder := StepFolder(cfg.Store, m.OpenAI.StorePath, cfg.Run, set.Step, id)
	if m.LoRA != nil {
		o.LoRAPath = folder
	} else {
		o.ReloadPath = folder
	}
	return openai.New(o)
}

// StepFolder is model id's folder of checkpoint step of run as a server reads it: under
// storePath (models.<id>.openai.store_path, the store as the server's machine mounts it) when
// set, else under the store URL.
func StepFolder(store, storePath, run string, step int64, id string) string {
	root := store
	if storePath != "" {
		root = storePath
	}
	return strings.TrimRight(root, "/") + "/" + layout.CheckpointDir(run, step) + "/" + id
}

// tokenizerFolder is a local folder holding model id's tokenizer files and its config: the
// step folder the checkpoint set loaded, else the base (models.<id>.hf).
func (env *Env) tokenizerFolder(id string, set *checkpoints.Set) (string, hf.Config, error) {
	if h := set.HF[id]; h != nil {
		return h.Dir, h.Config, nil
	}
	dir, err := env.BaseFolder(context.Background(), id)
	if err != nil {
		return "", hf.Config{}, err
	}
	hc, err := hf.ReadConfig(dir)
	if err != nil {
		return "", hf.Config{}, fmt.Errorf("model %s: %w", id, err)
	}
	return dir, hc, nil
}
