package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// UpdateWeightsRequest is the body of SGLang's POST /update_weights_from_disk (also served by
// drmas serve --hf): the server loads the weights of the model folder at ModelPath in place of
// the ones it serves, under the same model name.
type UpdateWeightsRequest struct {
	ModelPath string `json:"model_path"`
}

// UpdateWeightsResponse is its answer; Success false (HTTP 400) says why in Message.
type UpdateWeightsResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// ModelInfo is the part of SGLang's GET /get_model_info drmas reads: the folder the served
// weights were loaded from.
type ModelInfo struct {
	ModelPath string `json:"model_path"`
}

// reloadWeights makes the server serve the weights of Options.ReloadPath, once: it asks the
// folder the server serves (GET /get_model_info) and reloads (POST /update_weights_from_disk)
// unless it is ReloadPath already (another stage of the same step reloaded it), then checks
// that the server now reports ReloadPath. Ready calls it after the version wait.
func (b *Backend) reloadWeights(ctx context.Context) error {
	if b.o.ReloadPath == "" || b.reloaded.Load() {
		return nil
	}
	select { // one caller reloads; the others wait for it
	case b.reloadWait <- struct{}{}:
		defer func() { <-b.reloadWait }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.reloaded.Load() {
		return nil
	}
	served, err := b.modelPath(ctx)
	if err != nil {
		return err
	}
	if served != b.o.ReloadPath {
		body, err := json.Marshal(UpdateWeightsRequest{ModelPath: b.o.ReloadPath})
		if err != nil {
			return err
		}
		raw, url, err := b.do(ctx, http.MethodPost, "/update_weights_from_disk", body, 0)
		if err != nil {
			return fmt.Errorf("reload the weights of checkpoint step %d from %s: %w (the folder must be readable by the server: models.%s.openai.store_path names the store as its machine reads it)", b.o.Version, b.o.ReloadPath, err, b.o.ID)
		}
		var r UpdateWeightsResponse
		if err := json.Unmarshal(raw, &r); err != nil || !r.Success {
			return fmt.Errorf("POST %s: the server did not reload checkpoint step %d from %s: %s", url, b.o.Version, b.o.ReloadPath, strings.TrimSpace(excerpt(raw, b.o.APIKey)))
		}
		b.o.Logf("model %s: %s reloaded its weights from %s (checkpoint step %d)", b.o.ID, b.shown, b.o.ReloadPath, b.o.Version)
		if served, err = b.modelPath(ctx); err != nil {
			return err
		}
	}
	if served != b.o.ReloadPath {
		return fmt.Errorf("GET %s/get_model_info: the server serves the weights of %s, not those of checkpoint step %d at %s: is another run reloading it?", b.shown, served, b.o.Version, b.o.ReloadPath)
	}
	b.reloaded.Store(true)
	return nil
}

// modelPath is the folder the server's weights come from (GET /get_model_info).
func (b *Backend) modelPath(ctx context.Context) (string, error) {
	raw, url, err := b.do(ctx, http.MethodGet, "/get_model_info", nil, 0)
	if err != nil {
		return "", fmt.Errorf("ask the served weights: %w (models.%s.openai.reload: sglang needs SGLang or drmas serve --hf)", err, b.o.ID)
	}
	var info ModelInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("GET %s: not SGLang's model info: %w", url, err)
	}
	return info.ModelPath, nil
}
