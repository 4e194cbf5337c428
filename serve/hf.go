package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/tokenizer"
)

// DefaultMaxLoRAs is Options.MaxLoRAs' default: each loaded adapter is a merged copy of the
// base model's weights.
const DefaultMaxLoRAs = 4

// codec is the served model's tokenizer as the completions API needs it: text prompts in,
// token strings and text out.
type codec interface {
	encode(text string) []int32
	// token is id's string in logprobs.tokens.
	token(id int32) string
	special(id int32) bool
	// text is the completion's text, special tokens left out when skip.
	text(ids []int32, skip bool) string
}

// builtinCodec is the built-in policy's byte tokenizer; special-token names in text prompts
// become special tokens.
type builtinCodec struct{}

func (builtinCodec) encode(text string) []int32 { return model.EncodeSpecial(text) }
func (builtinCodec) token(id int32) string      { return model.TokenString(id) }
func (builtinCodec) special(id int32) bool      { return model.IsSpecial(id) }
func (builtinCodec) text(ids []int32, skip bool) string {
	var b strings.Builder
	for _, id := range ids {
		if !skip || !model.IsSpecial(id) {
			b.WriteString(model.TokenString(id))
		}
	}
	return b.String()
}

// bpeCodec is an HF model's tokenizer (tokenizer.json). Text is decoded as a whole, so
// characters split over tokens come out whole.
type bpeCodec struct{ t *tokenizer.BPE }

func (c bpeCodec) encode(text string) []int32 { return c.t.Encode(text) }
func (c bpeCodec) token(id int32) string      { return c.t.Decode([]int32{id}) }
func (c bpeCodec) special(id int32) bool      { return c.t.IsSpecial(id) }
func (c bpeCodec) text(ids []int32, skip bool) string {
	if skip {
		ids = slices.DeleteFunc(slices.Clone(ids), c.t.IsSpecial)
	}
	return c.t.Decode(ids)
}

// hfState is the LoRA adapters served beside an HF base model. Loading merges an adapter into
// a copy of the base outside the lock; the lock is held only to reserve and install names, so
// sampling never waits for a load.
type hfState struct {
	base *model.LLM
	mu   sync.Mutex
	// reload serializes /update_weights_from_disk.
	reload sync.Mutex
	// adapters are the loaded adapters by name, in load order (order); loading holds the
	// names being loaded (reserved against a second load of the same name and the cap).
	adapters map[string]*policy
	order    []string
	loading  map[string]bool
}

// newHF serves the HF model folder o.HF (config.json, safetensors weights, tokenizer.json).
func newHF(ctx context.Context, o Options) (*Server, error) {
	m, cfg, err := hf.LoadLLMContext(ctx, o.HF)
	if err != nil {
		return nil, fmt.Errorf("serve: --hf %s: %w", o.HF, err)
	}
	bpe, err := tokenizer.LoadDirContext(ctx, o.HF)
	if err != nil {
		return nil, fmt.Errorf("serve: --hf %s: %w", o.HF, err)
	}
	if o.Name == "" {
		o.Name = filepath.Base(filepath.Clean(o.HF))
	}
	if o.MaxLoRAs <= 0 {
		o.MaxLoRAs = DefaultMaxLoRAs
	}
	ac := m.Config()
	stop := slices.Sorted(slices.Values(hfmodel.StopIDs(bpe, cfg)))
	s := newServer(o, bpeCodec{bpe})
	s.hf = &hfState{base: m, adapters: map[string]*policy{}, loading: map[string]bool{}}
	s.cur.Store(&policy{name: o.Name, m: m, context: ac.Context, vocab: ac.Vocab, stop: stop, root: o.HF, pc: s.newPrefixCache()})
	return s, nil
}

// notFound is vLLM's answer to a request naming a model it does not serve.
func (s *Server) notFound(name string) *httpError {
	return &httpError{http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist: this server serves %s", excerpt.Name(name), strings.Join(s.names(), ", "))}
}

// lookup is the policy a request's "model" names: the base (also when empty) or an adapter.
func (s *Server) lookup(name string) (*policy, *httpError) {
	base := s.cur.Load()
	if name == "" || name == base.name {
		return base, nil
	}
	if s.hf != nil {
		s.hf.mu.Lock()
		p := s.hf.adapters[name]
		s.hf.mu.Unlock()
		if p != nil {
			return p, nil
		}
	}
	return nil, s.notFound(name)
}

// policies are the base and the loaded adapters, in load order.
func (s *Server) policies() []*policy {
	out := []*policy{s.cur.Load()}
	if s.hf != nil {
		s.hf.mu.Lock()
		for _, n := range s.hf.order {
			out = append(out, s.hf.adapters[n])
		}
		s.hf.mu.Unlock()
	}
	return out
}

func (s *Server) names() []string {
	var out []string
	for _, p := range s.policies() {
		out = append(out, fmt.Sprintf("%q", p.name))
	}
	return out
}

// card is p's entry in GET /v1/models.
func (s *Server) card(p *policy) openai.ModelCard {
	c := openai.ModelCard{ID: p.name, Object: "model", Created: s.created, OwnedBy: "drmas", MaxModelLen: p.context, Root: p.root}
	if p.parent != "" {
		c.Parent = &p.parent
	}
	if p.versioned {
		v := p.step
		c.DrmasPolicyVersion, c.DrmasRun, c.DrmasCheckpointSHA256 = &v, s.o.Run, p.sha
	}
	return c
}

// noLoRA answers the LoRA endpoints of the checkpoint mode.
func (s *Server) noLoRA(w http.ResponseWriter) bool {
	if s.hf != nil {
		return false
	}
	writeError(w, http.StatusNotFound, "LoRA adapters are served for a Hugging Face model only (drmas serve --hf DIR)", "NotFoundError")
	return true
}

// loadAdapter is vLLM's POST /v1/load_lora_adapter: the PEFT adapter folder at lora_path
// merged into a copy of the base, served as lora_name. Errors as vLLM's: 400 for a missing
// field, a name already loaded or an adapter that does not fit; 404 for a folder that is not
// there. drmas adds a cap (Options.MaxLoRAs, 400 over it).
func (s *Server) loadAdapter(w http.ResponseWriter, r *http.Request) {
	if s.noLoRA(w) {
		return
	}
	var req openai.LoadLoRAAdapterRequest
	if herr := s.readRequest(w, r, &req); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	if req.LoRAName == "" || req.LoRAPath == "" {
		writeError(w, http.StatusBadRequest, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput")
		return
	}
	if herr := checkLoRAName(req.LoRAName); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	if herr := s.hf.reserve(req.LoRAName, s.cur.Load().name, s.o.MaxLoRAs); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	p, herr := s.mergeAdapter(r.Context(), req)
	s.hf.install(req.LoRAName, p)
	if herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	s.o.Logf("serve: loaded LoRA adapter %s from %s", req.LoRAName, excerpt.Name(req.LoRAPath))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.LoRAName)
}

// reserve marks name as loading, or says why it cannot be loaded.
func (h *hfState) reserve(name, base string, max int) *httpError {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case name == base || h.adapters[name] != nil || h.loading[name]:
		return &httpError{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded.", excerpt.Name(name))}
	case len(h.adapters)+len(h.loading) >= max:
		return &httpError{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("cannot load LoRA adapter '%s': %d adapters are loaded or loading, the most this server holds (--max-loras %d): unload one first (POST /v1/unload_lora_adapter)", excerpt.Name(name), len(h.adapters)+len(h.loading), max)}
	}
	h.loading[name] = true
	return nil
}

// install ends name's load: p is served from now on, or the name is released when p is nil.
func (h *hfState) install(name string, p *policy) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.loading, name)
	if p != nil {
		h.adapters[name] = p
		h.order = append(h.order, name)
	}
}

// mergeAdapter builds the policy of an adapter: a copy of the base with the adapter merged in.
// A load whose client leaves stops between modules.
func (s *Server) mergeAdapter(ctx context.Context, req openai.LoadLoRAAdapterRequest) (*policy, *httpError) {
	dir, cleanup, herr := s.adapterDir(ctx, req.LoRAPath)
	if herr != nil {
		return nil, herr
	}
	defer cleanup()
	where := excerpt.Name(req.LoRAPath)
	if _, err := hf.ReadAdapterConfigContext(ctx, dir); err != nil {
		msg := hideDir(err.Error(), dir, req.LoRAPath)
		if errors.Is(err, hf.ErrFormat) || errors.Is(err, hf.ErrUnsupported) {
			return nil, badRequest("lora_path %s: %s", where, msg)
		}
		return nil, &httpError{http.StatusNotFound, "NotFoundError", fmt.Sprintf("No adapter found for %s: %s", where, msg)}
	}
	m, err := cloneLLM(s.hf.baseModel())
	if err != nil {
		return nil, &httpError{http.StatusInternalServerError, "InternalServerError", err.Error()}
	}
	if err := hf.ApplyAdapterContext(ctx, m, dir); err != nil {
		return nil, badRequest("lora_path %s: %s", where, hideDir(err.Error(), dir, req.LoRAPath))
	}
	base := s.cur.Load()
	return &policy{name: req.LoRAName, m: m, context: base.context, vocab: base.vocab, stop: base.stop, parent: base.name, root: req.LoRAPath, pc: s.newPrefixCache()}, nil
}

// cloneLLM copies m's weights into a new model.
func cloneLLM(m *model.LLM) (*model.LLM, error) {
	byName := make(map[string][]float32, len(m.Params()))
	for _, p := range m.Params() {
		byName[p.Name] = p.Data
	}
	return model.NewLLM(m.Config(), func(name string, dst []float32) error {
		src, ok := byName[name]
		if !ok || len(src) != len(dst) {
			return fmt.Errorf("copy of the base model: no tensor %s of %d values", name, len(dst))
		}
		copy(dst, src)
		return nil
	})
}

// unloadAdapter is vLLM's POST /v1/unload_lora_adapter. Requests already queued for the
// adapter still finish with it.
func (s *Server) unloadAdapter(w http.ResponseWriter, r *http.Request) {
	if s.noLoRA(w) {
		return
	}
	var req openai.UnloadLoRAAdapterRequest
	if herr := s.readRequest(w, r, &req); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	if req.LoRAName == "" {
		writeError(w, http.StatusBadRequest, "either 'lora_name' and 'lora_int_id' needs to be provided.", "InvalidUserInput")
		return
	}
	h := s.hf
	h.mu.Lock()
	p, ok := h.adapters[req.LoRAName]
	if ok {
		delete(h.adapters, req.LoRAName)
		h.order = slices.DeleteFunc(h.order, func(n string) bool { return n == req.LoRAName })
	}
	h.mu.Unlock()
	p.dropCache()
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The lora adapter '%s' cannot be found.", excerpt.Name(req.LoRAName)), "NotFoundError")
		return
	}
	s.o.Logf("serve: unloaded LoRA adapter %s", excerpt.Name(req.LoRAName))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", excerpt.Name(req.LoRAName))
}
