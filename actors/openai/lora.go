package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/actors"
)

// AdapterSep joins a served model's name and a checkpoint step into the name its LoRA adapter
// of that step is loaded as: "<model>@step=<N>".
const AdapterSep = "@step="

// AdapterName is the name the adapter of checkpoint step of model is loaded as.
func AdapterName(model string, step int64) string {
	return model + AdapterSep + strconv.FormatInt(step, 10)
}

// adapterStep is the step of name when it is one of model's adapters (AdapterName).
func adapterStep(model, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, model+AdapterSep)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n >= 0 && strconv.FormatInt(n, 10) == rest
}

// Tokenizer implements actors.Tokenized: Options.Tokenizer, else the built-in byte ids.
func (b *Backend) Tokenizer() actors.Tokenizer {
	if b.o.Tokenizer != nil {
		return b.o.Tokenizer
	}
	return actors.Bytes{}
}

// chatEOS is the stop ids a Chat tokenizer implies: its end of turn.
func chatEOS(t actors.Tokenizer) []int32 {
	var c actors.Chat
	switch v := t.(type) {
	case actors.Chat:
		c = v
	case *actors.Chat:
		if v != nil {
			c = *v
		}
	}
	if c.BPE == nil || c.BPE.EOS() < 0 {
		return nil
	}
	return []int32{c.BPE.EOS()}
}

// loadAdapter makes the server serve Options.LoRAPath as the backend's model name, once: it
// loads the adapter unless the server lists that name from that path already (another stage
// of the same step loaded it), then unloads the adapters of this model's older steps.
// Ready calls it after the version wait.
func (b *Backend) loadAdapter(ctx context.Context) error {
	if b.o.LoRAPath == "" || b.loraReady.Load() {
		return nil
	}
	select { // one caller loads; the others wait for it
	case b.loraWait <- struct{}{}:
		defer func() { <-b.loraWait }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.loraReady.Load() {
		return nil
	}
	list, _, err := b.models(ctx)
	if err != nil {
		return err
	}
	loaded := false
	for _, c := range list.Data {
		if c.ID != b.model {
			continue
		}
		if c.Root == "" || c.Root == b.o.LoRAPath {
			loaded = true
		} else if err := b.unloadAdapter(ctx, c.ID); err != nil { // a stale adapter under this step's name
			return err
		}
	}
	if !loaded {
		body, err := json.Marshal(LoadLoRAAdapterRequest{LoRAName: b.model, LoRAPath: b.o.LoRAPath})
		if err != nil {
			return err
		}
		_, url, err := b.do(ctx, http.MethodPost, "/v1/load_lora_adapter", body, 0)
		// A retry after a lost answer finds the adapter loaded by the first attempt.
		if err != nil && !(isStatus(err, http.StatusBadRequest) && strings.Contains(err.Error(), "already been loaded")) {
			return fmt.Errorf("load LoRA adapter %s of checkpoint step %d from %s: %w (vLLM needs --enable-lora, a --max-lora-rank at least the adapter's r, and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its environment; the path must be readable by the server)", b.model, b.o.Version, b.o.LoRAPath, err)
		}
		b.o.Logf("model %s: loaded LoRA adapter %s (checkpoint step %d) into %s from %s", b.o.ID, b.model, b.o.Version, url, b.o.LoRAPath)
	}
	for _, c := range list.Data {
		if step, ok := adapterStep(b.o.ServerModel, c.ID); ok && step < b.o.Version {
			if err := b.unloadAdapter(ctx, c.ID); err != nil {
				return err
			}
			b.o.Logf("model %s: unloaded LoRA adapter %s of an older step", b.o.ID, c.ID)
		}
	}
	b.loraReady.Store(true)
	return nil
}

// unloadAdapter unloads name; one that is not loaded (another backend unloaded it) is fine.
func (b *Backend) unloadAdapter(ctx context.Context, name string) error {
	body, err := json.Marshal(UnloadLoRAAdapterRequest{LoRAName: name})
	if err != nil {
		return err
	}
	if _, _, err := b.do(ctx, http.MethodPost, "/v1/unload_lora_adapter", body, 0); err != nil && !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("unload LoRA adapter %s: %w", name, err)
	}
	return nil
}

// isStatus reports whether err is an HTTP answer with status.
func isStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == status
}
