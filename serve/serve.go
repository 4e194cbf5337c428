// Package serve exposes the built-in policy's LATEST checkpoint of a run over the OpenAI
// completions API, as vLLM serves it (see serve/README.md): GET /v1/models, POST /v1/completions
// (token-id or text prompts, per-token log-probs, seeds, return_tokens_as_token_ids), GET
// /health.
//
// Every admitted prompt is decoded in one batch, a token a step (continuous batching,
// scheduler.go): a request joins at the next step and leaves when done. Sampling is seeded per
// prompt, so a response does not depend on what it was batched with: with the same seed, the
// server's tokens and log-probs equal the in-process backend's bit for bit (log-probs are
// written with float32 precision). The server polls LATEST and swaps in a new checkpoint
// atomically; a request is always served by one checkpoint, reported as drmas_policy_version and
// drmas_checkpoint_sha256. GET /v1/models and /health name the checkpoint served (step, run,
// manifest sha256), so that a stage sampling through the server (actors/openai,
// Options.RequireVersion) waits until it serves the step the stage records, and refuses
// another checkpoint.
//
// With Options.HF it serves a Hugging Face model folder instead (hf.go), through the same
// batching: text prompts encoded with its tokenizer, sampling stopped at its EOS ids, and
// vLLM's dynamic LoRA API (POST /v1/load_lora_adapter, /v1/unload_lora_adapter), each adapter
// merged into a copy of the base and sampled when a request names it.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/storage"
)

// Defaults of Options' zero values.
const (
	DefaultWindow    = 5 * time.Millisecond
	DefaultMaxBatch  = 64
	DefaultPoll      = 3 * time.Second
	DefaultMaxTokens = 16 // as vLLM and OpenAI
	// DefaultBodyTimeout bounds the reading of one request's body; DefaultIdleTimeout
	// closes a keep-alive connection that sends nothing for that long.
	DefaultBodyTimeout = 30 * time.Second
	DefaultIdleTimeout = 2 * time.Minute
	maxRequestBody     = 64 << 20
	// DefaultMaxPrompts and DefaultMaxPromptTokens bound the work one request may cause: a
	// rollout sends at most models.<m>.openai.max_batch prompts (default 64) a request.
	DefaultMaxPrompts      = 1024
	DefaultMaxPromptTokens = 1 << 18
	// PromptBytesPerToken sets MaxPromptBytes' default: MaxPromptTokens × 16, far above the
	// 3 to 5 bytes a token of text averages, so that a text prompt refused for its bytes would
	// have been refused for its tokens too, without tokenizing it first.
	PromptBytesPerToken = 16
	// DefaultRequestTimeout bounds one completion request from its arrival to its answer.
	DefaultRequestTimeout = 10 * time.Minute
	// DefaultMaxPrefill is how many prompt tokens one decode step feeds, all new requests
	// together: a long prompt is fed over several steps, and the requests decoding beside it
	// wait at most one such chunk per step (vLLM's chunked prefill).
	DefaultMaxPrefill = 2048
	// DefaultStreamBacklog is how many sampled tokens a streaming request may have waiting
	// for its client to read (all its prompts together) before the client is dropped.
	DefaultStreamBacklog = 1024
	// DefaultWriteTimeout bounds one write of a completion to its client (a streamed chunk or
	// the whole answer): a client that reads nothing for that long is dropped.
	DefaultWriteTimeout = 30 * time.Second
)

// Options configure a Server.
type Options struct {
	Bucket storage.Bucket
	Run    string
	// Model is the checkpoint's model to serve; empty = its only model.
	Model string
	// Name is the model name clients send; default Model.
	Name string
	// Window is how long a request that arrives while nothing is decoding waits for others to
	// share its first decode step; MaxBatch caps the prompts decoded together (the others wait,
	// in arrival order, for a place).
	Window   time.Duration
	MaxBatch int
	// Poll is how often LATEST is checked (default 3 s; < 0 = never).
	Poll time.Duration
	// BodyTimeout is how long a client may take to send a request's body once its header
	// arrived (default DefaultBodyTimeout); a slower one gets 408 and its connection is
	// closed, so a client that sends slowly cannot hold a handler. It does not limit the
	// generation or the response.
	BodyTimeout time.Duration
	// MaxPrompts caps the prompts of one request (400 over it) and MaxPromptTokens their
	// tokens in all (413 over it); defaults DefaultMaxPrompts and DefaultMaxPromptTokens.
	MaxPrompts, MaxPromptTokens int
	// MaxPromptBytes caps the bytes of a request's text prompts, all together, checked before
	// any is tokenized (413 over it); default MaxPromptTokens × PromptBytesPerToken.
	MaxPromptBytes int
	// RequestTimeout bounds a completion request from its arrival (default
	// DefaultRequestTimeout; < 0: none): past it, its sampling stops and it gets a 504.
	RequestTimeout time.Duration
	// MaxPrefill caps the prompt tokens one decode step feeds (default DefaultMaxPrefill;
	// < 0: none): see the scheduler (scheduler.go).
	MaxPrefill int
	// StreamBacklog is how many sampled tokens a streaming request may have unread before its
	// client is dropped (default DefaultStreamBacklog), and WriteTimeout how long one write to a
	// client may block (default DefaultWriteTimeout): a client that stops reading never holds
	// the decode loop, and the server keeps at most StreamBacklog tokens for it.
	StreamBacklog int
	WriteTimeout  time.Duration
	// HF, when set, is a local Hugging Face model folder (config.json, safetensors,
	// tokenizer.json) to serve instead of a run's checkpoint (Bucket, Run, Model and Poll are
	// then unused): Name defaults to the folder's base name, text prompts are encoded with its
	// tokenizer, and sampling stops at its end of turn and eos_token_id (hfmodel.StopIDs). Such a
	// server also loads PEFT LoRA adapters (POST /v1/load_lora_adapter), at most MaxLoRAs at
	// a time (default DefaultMaxLoRAs; each is a merged copy of the weights).
	HF       string
	MaxLoRAs int
	// AdapterRoot bounds lora_path: adapters are read only from a folder under it, a local
	// folder or a store URL prefix ("": anywhere). With AdapterCheckpoints the folder must
	// also be a run's checkpoint there (<root>/runs/<run>/checkpoints/…), as drmas serve's default
	// (the store's checkpoints). A path outside gets a 403.
	AdapterRoot        string
	AdapterCheckpoints bool
	// FetchAdapter downloads the two files of a PEFT adapter (adapter_config.json,
	// adapter_model.safetensors) of a store folder url into the local folder dst, and nothing
	// else (nil: a lora_path that is a store URL is refused).
	FetchAdapter func(ctx context.Context, url, dst string) error
	// Resolve turns a model_path that is a store URL (s3://…, file://…) into a local folder
	// (nil: only local folders are accepted).
	Resolve func(ctx context.Context, path string) (string, error)
	// PrefixCacheBytes bounds each served model's prefix cache (the base's, and each
	// adapter's): the keys and values of the whole 16-token blocks of the sequences it has
	// decoded, so that a request whose prompt starts with them (a chat's later turn) prefills
	// only the rest (default model.DefaultPrefixCacheBytes; < 0: no cache). A cache is dropped
	// when its weights change.
	PrefixCacheBytes int64
	// Logf receives one-line notices (nil: discarded).
	Logf func(format string, args ...any)
}

// Stats counts what the server did.
type Stats struct {
	Requests    int64 // completion requests answered with 200
	Prompts     int64 // prompts sampled
	Batches     int64 // decode steps (model.Step calls)
	MaxBatch    int64 // most prompts in one decode step
	Reloads     int64 // checkpoint swaps after the first load
	Stopped     int64 // requests whose decoding stopped early: the client left or its deadline passed
	SlowReaders int64 // streaming requests dropped because their client did not read
	Waiting     int64 // requests waiting for a place in the decode batch (MaxBatch) now
	// CachedTokens counts the prompt tokens taken from a prefix cache instead of prefilled.
	CachedTokens int64
}

// policy is one servable model: the built-in checkpoint, an HF model, or an HF model with a
// LoRA adapter merged in. A request is bound to one policy when it is parsed, so a reload or an
// unload never changes what samples a queued request.
type policy struct {
	name string // the model name requests send and responses report
	m    model.Policy
	// context and vocab bound the prompts; stop ends every sample (an HF model's EOS ids).
	context, vocab int
	stop           []int32
	// versioned: the checkpoint mode's policy, reported as drmas_policy_version (step) and
	// drmas_checkpoint_sha256 (sha, the manifest's sha256).
	versioned bool
	step      int64
	sha       string
	// parent and root describe an adapter on GET /v1/models (as vLLM): the base's name and
	// the lora_path it was loaded from.
	parent, root string
	// pc is the prefix cache of m's weights (nil: none); a policy of new weights gets a new one.
	pc *model.PrefixCache
}

// Server serves one model of a run.
type Server struct {
	o       Options
	cur     atomic.Pointer[policy] // the base model
	codec   codec
	hf      *hfState // nil in the checkpoint mode
	queue   chan *item
	stopped chan struct{}
	created int64
	ids     atomic.Int64

	requests, prompts, batches, maxBatch, reloads, stoppedCalls, slowReaders, waiting, cachedTokens atomic.Int64
}

// New loads the run's LATEST checkpoint (falling back to the newest usable one with a notice).
// With Options.HF it serves that Hugging Face model folder instead (newHF).
func New(ctx context.Context, o Options) (*Server, error) {
	if o.HF == "" && (o.Bucket == nil || o.Run == "") {
		return nil, errors.New("serve: a store and a run are needed")
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MaxPrompts <= 0 {
		o.MaxPrompts = DefaultMaxPrompts
	}
	if o.MaxPromptTokens <= 0 {
		o.MaxPromptTokens = DefaultMaxPromptTokens
	}
	if o.MaxPromptBytes <= 0 {
		o.MaxPromptBytes = min(o.MaxPromptTokens*PromptBytesPerToken, maxRequestBody)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxPrefill == 0 {
		o.MaxPrefill = DefaultMaxPrefill
	}
	if o.StreamBacklog <= 0 {
		o.StreamBacklog = DefaultStreamBacklog
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PrefixCacheBytes == 0 {
		o.PrefixCacheBytes = model.DefaultPrefixCacheBytes
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.HF != "" {
		return newHF(ctx, o)
	}
	set, err := checkpoints.Load(ctx, o.Bucket, o.Run, false, func(msg string) { o.Logf("serve: warning: %s", msg) })
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if o.Model == "" {
		if len(set.Models) != 1 {
			return nil, fmt.Errorf("serve: checkpoint step %d has models %s: choose one with --model", set.Step, strings.Join(set.ModelNames(), ", "))
		}
		o.Model = set.ModelNames()[0]
	}
	if o.Name == "" {
		o.Name = o.Model
	}
	s := newServer(o, builtinCodec{})
	if err := s.install(set); err != nil {
		return nil, err
	}
	return s, nil
}

func newServer(o Options, c codec) *Server {
	return &Server{o: o, codec: c, queue: make(chan *item, 4096), stopped: make(chan struct{}), created: time.Now().Unix()}
}

func (s *Server) install(set *checkpoints.Set) error {
	m, ok := set.Models[s.o.Model]
	if !ok {
		return fmt.Errorf("serve: checkpoint step %d has no model %q (it has %s)", set.Step, s.o.Model, strings.Join(set.ModelNames(), ", "))
	}
	if old := s.cur.Load(); old != nil && old.m.(*model.Model).Config() != m.Config() {
		return fmt.Errorf("serve: checkpoint step %d: model %s changed size (%+v → %+v): restart the server", set.Step, s.o.Model, old.m.(*model.Model).Config(), m.Config())
	}
	c := m.Config()
	old := s.cur.Swap(&policy{name: s.o.Name, m: m, context: c.Context, vocab: c.Vocab, versioned: true, step: set.Step, sha: set.ManifestSHA256, pc: s.newPrefixCache()})
	old.dropCache()
	return nil
}

// newPrefixCache is an empty prefix cache for a policy of new weights (nil: caching is off).
func (s *Server) newPrefixCache() *model.PrefixCache {
	if s.o.PrefixCacheBytes < 0 {
		return nil
	}
	return model.NewPrefixCache(s.o.PrefixCacheBytes)
}

// dropCache frees the blocks of a policy no new request samples with (nil: none). The
// requests it still decodes keep the blocks they hold, and whatever they add is freed with
// the policy.
func (p *policy) dropCache() {
	if p != nil && p.pc != nil {
		p.pc.Release()
	}
}

// Name is the served model name.
func (s *Server) Name() string { return s.o.Name }

// Version is the checkpoint step being served.
func (s *Server) Version() int64 { return s.cur.Load().step }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Prompts: s.prompts.Load(), Batches: s.batches.Load(), MaxBatch: s.maxBatch.Load(), Reloads: s.reloads.Load(), Stopped: s.stoppedCalls.Load(), SlowReaders: s.slowReaders.Load(), Waiting: s.waiting.Load(), CachedTokens: s.cachedTokens.Load()}
}

// Reload loads LATEST if it names a step other than the one served, and swaps it in. It
// reports whether it swapped (never, for an HF folder).
func (s *Server) Reload(ctx context.Context) (bool, error) {
	if s.hf != nil { // a folder, not a run: nothing to reload
		return false, nil
	}
	step, err := checkpoints.ReadLatest(ctx, s.o.Bucket, s.o.Run)
	if err != nil {
		return false, err
	}
	if step == s.Version() {
		return false, nil
	}
	set, err := checkpoints.LoadStep(ctx, s.o.Bucket, s.o.Run, step, false)
	if err != nil {
		return false, err
	}
	if err := s.install(set); err != nil {
		return false, err
	}
	s.reloads.Add(1)
	s.o.Logf("serve: now serving %s from checkpoint step %d", s.o.Model, step)
	return true, nil
}

// Serve answers requests on ln until ctx is cancelled, then shuts down gracefully: it stops
// accepting, lets in-flight requests finish (up to 30 s), and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	bctx, bcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.scheduler(bctx) }()
	if s.o.Poll > 0 && s.hf == nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.poll(ctx) }()
	}
	// No ReadTimeout or WriteTimeout: they would bound the whole exchange, generation
	// included; the body gets its own deadline (readRequest).
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: DefaultIdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if s.hf != nil {
		s.o.Logf("serve: model %s as %q on http://%s", s.o.HF, s.o.Name, ln.Addr())
	} else {
		s.o.Logf("serve: model %s (checkpoint step %d of run %s) as %q on http://%s", s.o.Model, s.Version(), s.o.Run, s.o.Name, ln.Addr())
	}
	var err error
	select {
	case <-ctx.Done():
		s.o.Logf("serve: shutting down (%v): finishing the requests in flight, up to 30s", context.Cause(ctx))
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil { // handlers still writing to clients that do not read: drop them
			_ = srv.Close()
		}
	case err = <-errc:
	}
	bcancel()
	wg.Wait()
	close(s.stopped)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// ListenAndServe listens on addr (host:port) and serves until ctx is cancelled.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return s.Serve(ctx, ln)
}

func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Reload(ctx); err != nil && ctx.Err() == nil {
				s.o.Logf("serve: warning: reload: %v (still serving step %d)", err, s.Version())
			}
		}
	}
}

// Handler returns the HTTP API. Requests need Serve (or Start) running to be answered.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		p := s.cur.Load()
		if !p.versioned {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "model": s.o.Name})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "model": s.o.Name, "policy_version": p.step, "run": s.o.Run, "checkpoint_sha256": p.sha})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		list := openai.ModelList{Object: "list"}
		for _, p := range s.policies() {
			list.Data = append(list.Data, s.card(p))
		}
		writeJSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("POST /v1/completions", s.completions)
	mux.HandleFunc("POST /v1/load_lora_adapter", s.loadAdapter)
	mux.HandleFunc("POST /v1/unload_lora_adapter", s.unloadAdapter)
	mux.HandleFunc("POST /update_weights_from_disk", s.updateWeights)
	mux.HandleFunc("GET /get_model_info", s.modelInfo)
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "drmas serve has no chat endpoint: use /v1/completions with token-id prompts", "NotFoundError")
	})
	return mux
}

// httpError is a failure with its status.
type httpError struct {
	status int
	typ    string
	msg    string
}

func badRequest(format string, args ...any) *httpError {
	return &httpError{http.StatusBadRequest, "BadRequestError", fmt.Sprintf(format, args...)}
}

// readRequest reads the JSON body within BodyTimeout, then lifts the read deadline so that
// it cannot end the connection in mid-generation (net/http also clears it when the body is
// read to its end; lifting it here does not depend on that).
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, req any) *httpError {
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(s.o.BodyTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if deadline && err == nil { // on an error the deadline stays, to end the connection
		err = rc.SetReadDeadline(time.Time{})
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.Header().Set("Connection", "close")
		return &httpError{http.StatusRequestTimeout, "RequestTimeoutError",
			fmt.Sprintf("request body not received within %s", s.o.BodyTimeout)}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &httpError{http.StatusRequestEntityTooLarge, "BadRequestError", fmt.Sprintf("request body over %d bytes", mbe.Limit)}
	}
	if err != nil {
		return badRequest("reading the request: %v", err)
	}
	if err := json.Unmarshal(body, req); err != nil {
		return badRequest("malformed JSON request: %v", err)
	}
	return nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req openai.CompletionRequest
	if herr := s.readRequest(w, r, &req); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	it, herr := s.parse(&req)
	if herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	rctx, cancel := s.requestContext(r)
	defer cancel()
	ctx, end := context.WithCancelCause(rctx)
	defer end(nil)
	it.ctx, it.cancel = ctx, end
	if req.Stream {
		it.prog = newProgress(len(it.reqs))
	}
	select {
	case s.queue <- it:
	case <-ctx.Done():
		s.ended(w, ctx)
		return
	case <-s.stopped:
		writeError(w, http.StatusServiceUnavailable, "server is shutting down", "ServiceUnavailableError")
		return
	}
	if req.Stream {
		s.stream(w, it, &req)
		return
	}
	var res result
	select {
	case res = <-it.done:
	case <-ctx.Done():
		s.ended(w, ctx)
		return
	case <-s.stopped:
		writeError(w, http.StatusServiceUnavailable, "server is shutting down", "ServiceUnavailableError")
		return
	}
	if res.err != nil {
		writeError(w, http.StatusInternalServerError, "sample: "+res.err.Error(), "InternalServerError")
		return
	}
	if herr := finite(res.res); herr != nil {
		writeError(w, herr.status, herr.msg, herr.typ)
		return
	}
	s.requests.Add(1)
	out := s.response(res.pol, &req)
	out.Choices, out.Usage = make([]openai.CompletionChoice, len(res.res)), &openai.Usage{}
	for i, sr := range res.res {
		c := openai.CompletionChoice{Index: i, FinishReason: &sr.FinishReason}
		c.Logprobs, _ = s.logprobs(sr.Tokens, sr.LogProbs, 0, &req)
		c.Text = s.codec.text(sr.Tokens, skipSpecial(&req))
		if req.Logprobs == nil {
			c.Logprobs = nil
		}
		out.Choices[i] = c
		out.Usage.PromptTokens += len(it.reqs[i].Prompt)
		out.Usage.CompletionTokens += len(sr.Tokens)
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	out.Usage.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: res.cached}
	w.Header().Set(StepsHeader, strconv.FormatInt(res.steps, 10))
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	writeJSON(w, http.StatusOK, out)
}

// StepsHeader is the response header that says how many decode steps the server ran from a
// completion's arrival to its last token: with continuous batching, about its max_tokens
// however long the generations beside it are.
const StepsHeader = "Drmas-Decode-Steps"

// response is a completion response without its choices, for a request sampled by pol.
func (s *Server) response(pol *policy, req *openai.CompletionRequest) openai.CompletionResponse {
	out := openai.CompletionResponse{ID: "cmpl-drmas-" + strconv.FormatInt(s.ids.Add(1), 16), Object: "text_completion", Created: time.Now().Unix(), Model: pol.name}
	out.DrmasSeedsHonoured = req.DrmasSeeds != nil
	if pol.versioned {
		out.DrmasPolicyVersion, out.DrmasCheckpointSHA256 = &pol.step, pol.sha
	}
	return out
}

func skipSpecial(req *openai.CompletionRequest) bool {
	return req.SkipSpecialTokens == nil || *req.SkipSpecialTokens
}

// logprobs is the per-token detail of toks (log-probs lps), their text starting at offset
// off, and the offset after them.
func (s *Server) logprobs(toks []int32, lps []float32, off int, req *openai.CompletionRequest) (*openai.Logprobs, int) {
	skip := skipSpecial(req)
	lp := &openai.Logprobs{TextOffset: []int{}, TokenLogprobs: []openai.LogProb{}, Tokens: []string{}, TopLogprobs: []map[string]openai.LogProb{}}
	for j, t := range toks {
		lp.TextOffset = append(lp.TextOffset, off)
		tok := s.codec.token(t)
		if !skip || !s.codec.special(t) {
			off += len(tok)
		}
		if req.ReturnTokensAsTokenIDs {
			tok = openai.TokenIDString(t)
		}
		v := openai.LogProb{V: lps[j]}
		lp.Tokens = append(lp.Tokens, tok)
		lp.TokenLogprobs = append(lp.TokenLogprobs, v)
		lp.TopLogprobs = append(lp.TopLogprobs, map[string]openai.LogProb{tok: v})
	}
	return lp, off
}

// requestContext is r's context (cancelled when the client leaves) bounded by RequestTimeout.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	if s.o.RequestTimeout < 0 {
		return context.WithCancel(r.Context())
	}
	return context.WithTimeout(r.Context(), s.o.RequestTimeout)
}

// ended answers a request whose context is done: a 504 past its deadline; nothing when its
// client left (no one reads the answer).
func (s *Server) ended(w http.ResponseWriter, ctx context.Context) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		writeError(w, http.StatusGatewayTimeout, fmt.Sprintf("the completion did not finish within %s (--request-timeout): ask for fewer max_tokens or raise it", s.o.RequestTimeout), "TimeoutError")
	}
}

// finite refuses to answer with a NaN or infinite log-probability (weights that overflow):
// a 200 would hand a client numbers it cannot use.
func finite(res []model.SampleResult) *httpError {
	for i, sr := range res {
		if herr := finiteRow(i, sr.LogProbs); herr != nil {
			return herr
		}
	}
	return nil
}

// finiteRow is finite for prompt i's log-probabilities lps.
func finiteRow(i int, lps []float32) *httpError {
	for j, lp := range lps {
		if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 1) {
			return &httpError{http.StatusInternalServerError, "InternalServerError",
				fmt.Sprintf("prompt %d: token %d has the log-probability %v: the model's computation is not finite (its weights overflow)", i, j, lp)}
		}
	}
	return nil
}

// parse validates a completion request and turns it into a queue item.
func (s *Server) parse(req *openai.CompletionRequest) (*item, *httpError) {
	pol, herr := s.lookup(req.Model)
	if herr != nil {
		return nil, herr
	}
	if req.Echo {
		return nil, badRequest("echo is not supported")
	}
	if req.N != nil && *req.N != 1 {
		return nil, badRequest("n must be 1 (got %d)", *req.N)
	}
	if req.Logprobs != nil && *req.Logprobs < 0 {
		return nil, badRequest("logprobs must be ≥ 0")
	}
	prompts, err := parsePrompt(req.Prompt, s.codec.encode, s.o.MaxPromptBytes)
	var tb *promptBytesError
	if errors.As(err, &tb) {
		return nil, &httpError{http.StatusRequestEntityTooLarge, "BadRequestError",
			fmt.Sprintf("this request's text prompts have %d bytes in all; this server takes at most %d per request (--max-prompt-bytes): send them in several requests", tb.n, s.o.MaxPromptBytes)}
	}
	if err != nil {
		return nil, badRequest("prompt: %v", err)
	}
	if herr := s.checkWork(prompts); herr != nil {
		return nil, herr
	}
	o := model.SampleOptions{Temperature: 1, TopP: 1, MaxTokens: DefaultMaxTokens}
	if req.Temperature != nil {
		o.Temperature = float32(*req.Temperature)
		if !(o.Temperature >= 0) || math.IsInf(float64(o.Temperature), 0) {
			// Sampling runs in float32: say so, as 1e300 is finite as the client sent it.
			return nil, badRequest("temperature must be a finite number ≥ 0 and at most %g, float32's largest (got %v)", math.MaxFloat32, *req.Temperature)
		}
	}
	if req.TopP != nil {
		if !(*req.TopP > 0 && *req.TopP <= 1) {
			return nil, badRequest("top_p must be in (0, 1]")
		}
		// As the in-process backend: a top_p below float32's range keeps the most likely
		// token only; it must not round to 0, which model.Sample reads as no nucleus.
		o.TopP = actors.TopP32(*req.TopP)
	}
	if req.TopK != nil {
		if *req.TopK < -1 {
			return nil, badRequest("top_k must be ≥ 1, or 0 or -1 for off (got %d)", *req.TopK)
		}
		o.TopK = max(*req.TopK, 0)
	}
	if req.MaxTokens != nil {
		if *req.MaxTokens < 1 {
			return nil, badRequest("max_tokens must be ≥ 1")
		}
		o.MaxTokens = *req.MaxTokens
	}
	if req.DrmasSeeds != nil && len(req.DrmasSeeds) != len(prompts) {
		return nil, badRequest("drmas_seeds has %d seeds for %d prompts", len(req.DrmasSeeds), len(prompts))
	}
	if o.Stop, herr = stopTokens(pol, req.StopTokenIDs); herr != nil {
		return nil, herr
	}
	it := &item{pol: pol, opts: o, done: make(chan result, 1), reqs: make([]model.SampleRequest, len(prompts))}
	for i, pr := range prompts {
		if herr := checkPrompt(pol, i, pr, o.MaxTokens); herr != nil {
			return nil, herr
		}
		var seed uint64
		switch {
		case req.DrmasSeeds != nil:
			seed = req.DrmasSeeds[i]
		case req.Seed != nil:
			seed = uint64(*req.Seed) // as vLLM: one seed for every prompt of the request
		default:
			seed = rand.Uint64()
		}
		it.reqs[i] = model.SampleRequest{Prompt: pr, Seed: seed}
	}
	return it, nil
}

// checkPrompt checks prompt i against the policy's context and vocabulary.
func checkPrompt(pol *policy, i int, pr []int32, maxTokens int) *httpError {
	if len(pr) == 0 {
		return badRequest("prompt %d is empty", i)
	}
	if len(pr) >= pol.context {
		return badRequest("prompt %d has %d tokens; this model's maximum context length is %d tokens", i, len(pr), pol.context)
	}
	if len(pr)+maxTokens > pol.context { // as vLLM: refused, not cut short at the context
		return badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			pol.context, len(pr)+maxTokens, len(pr), maxTokens)
	}
	for _, t := range pr {
		if t < 0 || int(t) >= pol.vocab {
			return badRequest("prompt %d: token id %d is out of vocabulary [0, %d)", i, t, pol.vocab)
		}
	}
	return nil
}

// stopTokens is the policy's own stop ids and the request's stop_token_ids (vLLM's
// extension), sorted and without repeats, so that equal sets batch together.
func stopTokens(pol *policy, extra []int32) ([]int32, *httpError) {
	for _, t := range extra {
		if t < 0 || int(t) >= pol.vocab {
			return nil, badRequest("stop_token_ids: token id %d is out of vocabulary [0, %d)", t, pol.vocab)
		}
	}
	if len(pol.stop)+len(extra) == 0 {
		return nil, nil
	}
	out := slices.Concat(pol.stop, extra)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkWork bounds the work of one request: its prompts, and their tokens in all.
func (s *Server) checkWork(prompts [][]int32) *httpError {
	if len(prompts) > s.o.MaxPrompts {
		return badRequest("this request has %d prompts; this server takes at most %d per request (--max-prompts): send them in several requests", len(prompts), s.o.MaxPrompts)
	}
	total := 0
	for _, p := range prompts {
		total += len(p)
	}
	if total > s.o.MaxPromptTokens {
		return &httpError{http.StatusRequestEntityTooLarge, "BadRequestError",
			fmt.Sprintf("this request's prompts have %d tokens in all; this server takes at most %d per request (--max-prompt-tokens): send them in several requests", total, s.o.MaxPromptTokens)}
	}
	return nil
}

// promptBytesError is parsePrompt's error for text prompts over its byte budget.
type promptBytesError struct{ n int }

func (e *promptBytesError) Error() string { return fmt.Sprintf("%d bytes of text", e.n) }

// parsePrompt accepts a string, a list of strings, a list of token ids or a list of token-id
// lists. Text is encoded with encode (the served model's tokenizer; special-token names
// recognised), once its bytes, all prompts together, are known to be at most maxBytes.
func parsePrompt(raw json.RawMessage, encode func(string) []int32, maxBytes int) ([][]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if len(str) > maxBytes {
			return nil, &promptBytesError{len(str)}
		}
		return [][]int32{encode(str)}, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return nil, errors.New("empty")
		}
		return [][]int32{ids}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		n := 0
		for _, s := range strs {
			n += len(s)
		}
		if n > maxBytes {
			return nil, &promptBytesError{n}
		}
		out := make([][]int32, len(strs))
		for i, s := range strs {
			out[i] = encode(s)
		}
		if len(out) == 0 {
			return nil, errors.New("empty")
		}
		return out, nil
	}
	var lists [][]int32
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, errors.New("want a string, a list of strings, a list of token ids or a list of token-id lists")
	}
	if len(lists) == 0 {
		return nil, errors.New("empty")
	}
	return lists, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg, typ string) {
	writeJSON(w, status, openai.ErrorResponse{Error: openai.ErrorDetail{Message: msg, Type: typ, Code: status}})
}
