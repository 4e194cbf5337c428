package openai_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors/openai"
)

// TestReloadChecksTheServedFolder: a server that answers success to the reload but still
// reports another folder on /get_model_info (another run reloaded it, or it ignored the
// request) fails the Generate before any completion is sent; so does SGLang's failure answer,
// with its message. ReloadPath needs mode completions and no LoRA adapter.
func TestReloadChecksTheServedFolder(t *testing.T) {
	for _, c := range []struct {
		name   string
		reload func(http.ResponseWriter, *http.Request, []byte)
		want   string
	}{
		{"ignored", reply(200, []byte(`{"success": true, "message": "ok"}`)), "the server serves the weights of /base, not those of checkpoint step 2 at /store/step=2/m1"},
		{"failed", reply(400, []byte(`{"success": false, "message": "Failed to load: shape mismatch"}`)), "Failed to load: shape mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			completions := 0
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				switch r.URL.Path {
				case "/get_model_info":
					reply(200, []byte(`{"model_path": "/base"}`))(w, r, body)
				case "/update_weights_from_disk":
					c.reload(w, r, body)
				default:
					completions++
					reply(200, fixture(t, "vllm_completions_response.json"))(w, r, body)
				}
			})
			b := backend(t, openai.Options{Endpoint: s.URL, Version: 2, ReloadPath: "/store/step=2/m1", Retries: -1})
			_, err := b.Generate(context.Background(), oneRequest(), sampling)
			if err == nil || !strings.Contains(err.Error(), c.want) || completions != 0 {
				t.Errorf("Generate: %v after %d completions, want an error with %q before any", err, completions, c.want)
			}
		})
	}
	for _, o := range []openai.Options{{Mode: openai.ModeChat}, {LoRAPath: "/adapters/step=1"}} {
		o.ID, o.Endpoint, o.ReloadPath = "m", "http://127.0.0.1:1", "/store/step=1/m"
		if _, err := openai.New(o); err == nil || !strings.Contains(err.Error(), "needs mode completions and no LoRA adapter") {
			t.Errorf("reload with %+v: %v", o, err)
		}
	}
}
