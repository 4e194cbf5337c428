package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
)

// modelInfo is SGLang's GET /get_model_info: the folder the served weights come from (the
// --hf folder, or the last model_path of /update_weights_from_disk).
func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	if s.notHF(w) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"model_path": s.cur.Load().root, "tokenizer_path": s.o.HF, "is_generation": true})
}

// updateWeights is SGLang's POST /update_weights_from_disk: the HF folder at model_path (a
// store URL is fetched as the --hf folder was) replaces the served weights under the same
// name; it must have the served model's architecture and sizes. Requests already queued
// finish with the old weights; the new weights start with an empty prefix cache. Adapters
// loaded later merge into the new weights; adapters already loaded keep theirs (and their
// caches). Errors as SGLang's: HTTP 400 with success false and a message.
func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	if s.notHF(w) {
		return
	}
	var req openai.UpdateWeightsRequest
	if herr := s.readRequest(w, r, &req); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	fail := func(format string, args ...any) {
		writeJSON(w, http.StatusBadRequest, openai.UpdateWeightsResponse{Message: fmt.Sprintf(format, args...)})
	}
	if req.ModelPath == "" {
		fail("model_path must be provided")
		return
	}
	s.hf.reload.Lock() // one reload at a time, in arrival order
	defer s.hf.reload.Unlock()
	dir, err := s.resolve(r.Context(), req.ModelPath)
	if err != nil {
		fail("model_path %s: %v", excerpt.Name(req.ModelPath), err)
		return
	}
	m, _, err := hf.LoadLLMContext(r.Context(), dir)
	if err != nil {
		fail("model_path %s: %v", excerpt.Name(req.ModelPath), err)
		return
	}
	cur := s.cur.Load()
	if got, want := m.Config(), s.hf.baseModel().Config(); got != want {
		fail("model_path %s: a model of config %+v, but this server serves %+v: start a server for it", excerpt.Name(req.ModelPath), got, want)
		return
	}
	next := *cur
	next.m, next.root, next.pc = m, req.ModelPath, s.newPrefixCache()
	s.hf.mu.Lock()
	s.hf.base = m
	s.hf.mu.Unlock()
	s.cur.Store(&next)
	cur.dropCache() // the old weights' keys and values
	s.o.Logf("serve: serving the weights of %s", excerpt.Name(req.ModelPath))
	writeJSON(w, http.StatusOK, openai.UpdateWeightsResponse{Success: true, Message: "Succeeded to update model weights."})
}

// resolve is the local folder of a model_path or lora_path: itself, or a store URL fetched
// through Options.Resolve.
func (s *Server) resolve(ctx context.Context, p string) (string, error) {
	if !strings.Contains(p, "://") {
		return p, nil
	}
	if s.o.Resolve == nil {
		return "", fmt.Errorf("this server reads local folders only")
	}
	return s.o.Resolve(ctx, p)
}

// baseModel is the model adapters merge into.
func (h *hfState) baseModel() *model.LLM {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base
}

// notHF answers the weight endpoints of the checkpoint mode, which reloads LATEST itself.
func (s *Server) notHF(w http.ResponseWriter) bool {
	if s.hf != nil {
		return false
	}
	writeError(w, http.StatusNotFound, "weights are reloaded from disk for a Hugging Face model only (drmas serve --hf DIR); this server loads its run's LATEST checkpoint every --poll", "NotFoundError")
	return true
}
