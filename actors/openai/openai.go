// Package openai is an actor backend that generates through an OpenAI-compatible HTTP server:
// vLLM, SGLang, or `drmas serve` (package serve).
//
// In completions mode (the default) it POSTs token-id prompts to {endpoint}/v1/completions
// with logprobs=1, a per-request seed, and vLLM's return_tokens_as_token_ids, and stores the
// token ids and log-probs the server returns as they come (never re-tokenised). In chat mode
// (for servers with only /v1/chat/completions) it sends the prompt text as a user message; the
// answer is re-encoded with the built-in byte tokenizer and has no log-probs, so its rows
// cannot be trained with PPO.
//
// Token ids are the built-in policy's byte-level vocabulary (actors.PromptIDs) unless
// Options.Tokenizer gives the served model's own (actors.Chat over a Hugging Face folder): the
// backend is then that model's tokenizer (actors.Tokenized), so vLLM, SGLang or `drmas serve
// --hf` hosting the folder samples on-policy, and the end of turn is sent as stop_token_ids.
// With Options.LoRAPath the backend samples with the LoRA adapter of the stage's step, loaded
// into the server as "<model>@step=N" (vLLM's /v1/load_lora_adapter) and checked in every
// response; adapters of older steps are unloaded.
//
// Requests are limited to Concurrency in flight per backend (shared by all agents of the
// model); 429, 5xx and connection errors are retried with exponential backoff and
// deterministic jitter. Any failed request fails the whole Generate.
//
// A backend of a model drmas trains (Options.RequireVersion: the model has sizes, and `drmas
// serve` serves its checkpoints) samples only with the checkpoint step the stage records:
// before its first request it waits until the server reports that step on GET /v1/models
// (drmas serve reloads LATEST every --poll); a server of another run, or of another
// checkpoint of that step, and a response sampled by another step or checkpoint are errors.
// Servers that report no version (vLLM, SGLang) are used as they are.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/model"
)

// Modes.
const (
	ModeCompletions = "completions"
	ModeChat        = "chat"
)

// Defaults of Options' zero values.
const (
	DefaultConcurrency = 8
	DefaultMaxBatch    = 64
	DefaultTimeout     = 120 * time.Second
	DefaultRetries     = 3
	DefaultBackoff     = 250 * time.Millisecond
	DefaultVersionWait = 2 * time.Minute
	maxBackoff         = 30 * time.Second
	versionPoll        = 200 * time.Millisecond // how often a waiting backend asks the server's version
	maxBody            = 256 << 20
)

// transport is shared by every Backend without its own Client, so the backends that each
// rollout iteration builds reuse one pool of keep-alive connections.
var transport = sync.OnceValue(func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	return tr
})

// Options configure a Backend.
type Options struct {
	// ID is the drmas model id recorded in rows (and used in messages).
	ID string
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine).
	Endpoint string
	// ServerModel is the request's "model"; default ID.
	ServerModel string
	// APIKey is sent as a Bearer token. It never appears in errors or Describe.
	APIKey string
	// Mode is ModeCompletions (default) or ModeChat.
	Mode string
	// Batch sends up to MaxBatch prompts per request with per-prompt seeds (drmas_seeds):
	// drmas serve only.
	Batch    bool
	MaxBatch int
	// Concurrency is the number of requests in flight (default 8), shared by every Generate.
	Concurrency int
	// Timeout bounds one HTTP attempt (default 120 s). Timeouts are not retried.
	Timeout time.Duration
	// Retries after 429/5xx/connection errors (0 = default 3, < 0 = none); Backoff is the
	// first delay (default 250 ms), doubled each retry, plus jitter drawn deterministically
	// from JitterSeed and the request's seed.
	Retries    int
	Backoff    time.Duration
	JitterSeed uint64
	// Version is the policy version recorded when the server does not report one (only
	// drmas serve does, as drmas_policy_version).
	Version int64
	// RequireVersion makes Version the only policy version accepted from a server that
	// reports one: the stage records Version as the checkpoint step that sampled. Before its
	// first request, Generate waits (polling GET /v1/models, at most VersionWait, default
	// DefaultVersionWait) until the server reports Version, and fails if it still serves an
	// older step or serves a newer one; a response whose drmas_policy_version is not Version
	// fails the Generate. A server that reports no version is used as it is. stages.Backends
	// sets it for the models drmas trains (FromConfig).
	RequireVersion bool
	VersionWait    time.Duration
	// Run is the run whose checkpoint Version the stage samples from (optional): with
	// RequireVersion, a drmas serve of another run (drmas_run on GET /v1/models) is an error
	// at once, whatever step it serves.
	Run string
	// CheckpointSHA256 is the sha256 of checkpoint Version's manifest (optional): with
	// RequireVersion, a server that serves step Version of another checkpoint (it reports
	// another drmas_checkpoint_sha256, on GET /v1/models or in a response: another run or
	// store, or a server restarted on one during the stage) is an error.
	CheckpointSHA256 string
	// Tokenizer encodes the prompts (the backend implements actors.Tokenized, so rollout and
	// evaluate encode with it): the served model's own, e.g. actors.Chat over the HF folder
	// the server hosts, so that vLLM or SGLang serving that folder samples on-policy. nil:
	// actors.Bytes, the built-in policy's ids. Completions mode only.
	Tokenizer actors.Tokenizer
	// StopTokenIDs are sent as vLLM's stop_token_ids: a sample ends when it draws one, as
	// in-process sampling ends at the tokenizer's end of turn. nil with an actors.Chat
	// Tokenizer: its EOS (<|im_end|>).
	StopTokenIDs []int32
	// LoRAPath is the PEFT LoRA adapter of checkpoint step Version, as the server reads it (a
	// folder on the server's machine; drmas serve also reads store URLs). When set, the
	// backend samples with the adapter: before its first request it loads it as
	// "<ServerModel>@step=<Version>" (POST /v1/load_lora_adapter, unless the server lists it
	// already from that path), then unloads the adapters "<ServerModel>@step=M" of older steps
	// M < Version; every request names the adapter, and a response naming another model fails
	// the Generate. Completions mode only.
	LoRAPath string
	// ReloadPath is the Hugging Face folder of checkpoint step Version trained in full, as the
	// server reads it: before its first request the backend makes the server serve its
	// weights with SGLang's POST /update_weights_from_disk (unless GET /get_model_info reports
	// that folder already) and checks that it does. Completions mode only; not with LoRAPath.
	ReloadPath string
	// Logf receives one-line notices: the wait for the server to load Version (nil: none).
	Logf func(format string, args ...any)
	// Client is the HTTP client (default: a new one with keep-alive).
	Client *http.Client
}

// Backend generates through an OpenAI-compatible server.
type Backend struct {
	o       Options
	base    string
	shown   string // base with any password masked: what logs and errors print
	client  *http.Client
	sem     chan struct{}
	version atomic.Int64
	// ready is set once the server reported the required version (or that it reports none);
	// waiting holds the one Generate that polls for it.
	ready   atomic.Bool
	waiting chan struct{}
	// model is the request's "model": ServerModel, or the adapter's name with LoRAPath;
	// loraReady is set once the adapter is loaded, by the one Ready that holds loraWait.
	model     string
	loraReady atomic.Bool
	loraWait  chan struct{}
	// reloaded is set once the server serves ReloadPath, by the one Ready that holds
	// reloadWait.
	reloaded   atomic.Bool
	reloadWait chan struct{}
	// stats
	requests atomic.Int64
	retries  atomic.Int64
}

var (
	_ actors.Backend   = (*Backend)(nil)
	_ actors.Readier   = (*Backend)(nil)
	_ actors.Tokenized = (*Backend)(nil)
)

// New returns a backend for o.
func New(o Options) (*Backend, error) {
	if o.ID == "" {
		return nil, errors.New("openai backend: no model id")
	}
	if !strings.HasPrefix(o.Endpoint, "http://") && !strings.HasPrefix(o.Endpoint, "https://") {
		return nil, fmt.Errorf("openai backend %s: endpoint %q must start with http:// or https://", o.ID, o.Endpoint)
	}
	switch o.Mode {
	case "":
		o.Mode = ModeCompletions
	case ModeCompletions, ModeChat:
	default:
		return nil, fmt.Errorf("openai backend %s: mode %q is not completions or chat", o.ID, o.Mode)
	}
	if o.Batch && o.Mode == ModeChat {
		return nil, fmt.Errorf("openai backend %s: batch needs mode completions", o.ID)
	}
	if o.Mode == ModeChat && (o.Tokenizer != nil || o.LoRAPath != "") {
		return nil, fmt.Errorf("openai backend %s: a model tokenizer and a LoRA adapter need mode completions (chat mode sends text and gets no token ids)", o.ID)
	}
	if o.ReloadPath != "" && (o.Mode == ModeChat || o.LoRAPath != "") {
		return nil, fmt.Errorf("openai backend %s: reloading the weights needs mode completions and no LoRA adapter", o.ID)
	}
	if o.StopTokenIDs == nil {
		o.StopTokenIDs = chatEOS(o.Tokenizer)
	}
	if o.ServerModel == "" {
		o.ServerModel = o.ID
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.VersionWait <= 0 {
		o.VersionWait = DefaultVersionWait
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	c := o.Client
	if c == nil {
		c = &http.Client{Transport: transport()}
	}
	b := &Backend{o: o, base: strings.TrimSuffix(strings.TrimSuffix(o.Endpoint, "/"), "/v1"), client: c,
		sem: make(chan struct{}, o.Concurrency), waiting: make(chan struct{}, 1), model: o.ServerModel, loraWait: make(chan struct{}, 1), reloadWait: make(chan struct{}, 1)}
	if o.LoRAPath != "" {
		b.model = AdapterName(o.ServerModel, o.Version)
	}
	b.shown = b.base
	if u, err := url.Parse(b.base); err == nil && u.User != nil {
		b.shown = u.Redacted() // credentials in the endpoint never reach logs or errors
	}
	b.version.Store(o.Version)
	return b, nil
}

// Checkpoint is the checkpoint a stage samples from and records as the rows' policy_version:
// its run, its step, and the sha256 of its manifest ("" when unknown).
type Checkpoint struct {
	Run    string
	Step   int64
	SHA256 string
}

// FromConfig builds the backend of model id from its config m (an openai model) for a stage
// that samples from checkpoint at; the API key is read from the environment variable m.OpenAI
// names, through lookupEnv (nil: os.LookupEnv); seed seeds the retry jitter; logf receives
// notices (nil: none).
//
// A model with sizes in completions mode is the built-in policy, trained by drmas and served
// by `drmas serve`: its backend requires at (Options.RequireVersion), so it waits for the
// server to load that checkpoint and never records another checkpoint's samples as at's. An
// external model (no sizes) records the version its server reports, else at.Step; chat mode
// reports none (drmas serve has no chat endpoint).
func FromConfig(id string, m configs.Model, at Checkpoint, seed uint64, lookupEnv func(string) (string, bool), logf func(string, ...any)) (*Backend, error) {
	o, err := OptionsFromConfig(id, m, at, seed, lookupEnv, logf)
	if err != nil {
		return nil, err
	}
	return New(o)
}

// OptionsFromConfig is the Options FromConfig builds its backend with, for a caller that sets
// more of them (Tokenizer, LoRAPath) before New.
func OptionsFromConfig(id string, m configs.Model, at Checkpoint, seed uint64, lookupEnv func(string) (string, bool), logf func(string, ...any)) (Options, error) {
	c := m.OpenAI
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var key string
	if c.APIKeyEnv != "" {
		v, ok := lookupEnv(c.APIKeyEnv)
		if !ok || v == "" {
			return Options{}, fmt.Errorf("models.%s.openai.api_key_env names the environment variable %s, which is not set", id, c.APIKeyEnv)
		}
		key = v
	}
	return Options{
		ID: id, Endpoint: c.Endpoint, ServerModel: c.Model, APIKey: key, Mode: c.Mode,
		Batch: c.Batch, MaxBatch: c.MaxBatch, Concurrency: c.Concurrency, Timeout: c.Timeout,
		Retries: c.Retries, Backoff: c.Backoff, JitterSeed: seed, Version: at.Step, VersionWait: c.VersionWait,
		RequireVersion: !m.External() && c.Mode != ModeChat, Run: at.Run, CheckpointSHA256: at.SHA256, Logf: logf,
	}, nil
}

// Model implements actors.Backend.
func (b *Backend) Model() string { return b.o.ID }

// Version implements actors.Backend. With Options.RequireVersion it is Options.Version (a
// response sampled by another step fails its Generate); otherwise the policy version the
// server reported for the last Generate (the lowest, if a batch spanned a reload), else
// Options.Version.
func (b *Backend) Version() int64 { return b.version.Load() }

// Describe implements actors.Describer. It never includes the API key.
func (b *Backend) Describe() string {
	s := fmt.Sprintf("openai %s, model %s, concurrency %d", b.shown, b.model, b.o.Concurrency)
	if b.o.Batch {
		s += fmt.Sprintf(", batch %d", b.o.MaxBatch)
	}
	if b.o.Mode == ModeChat {
		s += ", chat: no log-probs, not trainable"
	}
	return s
}

// Stats returns the HTTP attempts made and how many of them were retries.
func (b *Backend) Stats() (requests, retries int64) { return b.requests.Load(), b.retries.Load() }

// Close releases the idle connections of a backend with its own Client (the shared pool is
// left to other backends).
func (b *Backend) Close() error {
	if b.o.Client != nil {
		b.o.Client.CloseIdleConnections()
	}
	return nil
}

// Generate implements actors.Backend. Requests run concurrently (at most Concurrency in flight
// across all callers); the first failure cancels the rest and fails the call.
func (b *Backend) Generate(ctx context.Context, reqs []actors.Request, s actors.Sampling) ([]actors.Response, error) {
	out := make([]actors.Response, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	if err := b.Ready(ctx); err != nil {
		return nil, err
	}
	type job struct{ lo, hi int }
	var jobs []job
	step := 1
	if b.o.Batch {
		step = b.o.MaxBatch
	}
	for lo := 0; lo < len(reqs); lo += step {
		jobs = append(jobs, job{lo, min(lo+step, len(reqs))})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(jobs))
	versions := make([]*int64, len(jobs))
	var wg sync.WaitGroup
	for j, jb := range jobs {
		select {
		case b.sem <- struct{}{}:
		case <-ctx.Done():
			errs[j] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-b.sem }()
			var err error
			if b.o.Mode == ModeChat {
				err = b.chat(ctx, reqs[jb.lo], s, &out[jb.lo])
			} else {
				versions[j], err = b.complete(ctx, reqs[jb.lo:jb.hi], s, out[jb.lo:jb.hi])
			}
			if err != nil {
				errs[j] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report the first real failure, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			first = err
			break
		}
	}
	if first == nil {
		first = errors.Join(errs...)
	}
	if first != nil {
		return nil, fmt.Errorf("model %s (%s): %w", b.o.ID, b.shown, first)
	}
	var v *int64
	for _, x := range versions {
		if x != nil && (v == nil || *x < *v) {
			v = x
		}
	}
	if v != nil {
		b.version.Store(*v)
	}
	return out, nil
}

// Ready implements actors.Readier: with Options.RequireVersion it returns once the server
// serves checkpoint Options.Version (awaitVersion), else at once. Generate calls it.
func (b *Backend) Ready(ctx context.Context) error {
	err := b.awaitVersion(ctx)
	if err == nil {
		err = b.loadAdapter(ctx)
	}
	if err == nil {
		err = b.reloadWeights(ctx)
	}
	if err != nil {
		return fmt.Errorf("model %s (%s): %w", b.o.ID, b.shown, err)
	}
	return nil
}

// awaitVersion returns once the server serves Options.Version, with RequireVersion: it polls
// the checkpoint the server reports (served) until it is Version, for at most VersionWait. A
// server that serves a newer step, another checkpoint of step Version (CheckpointSHA256), or
// still an older step after the wait is an error; one that reports no version is taken as it
// is. A server that refuses connections (not listening yet) counts toward the same wait.
// A drmas serve of another run than Options.Run is an error at once: it never serves
// this run's step. Only the first call waits: every response is checked afterwards
// (complete).
func (b *Backend) awaitVersion(ctx context.Context) error {
	if !b.o.RequireVersion || b.ready.Load() {
		return nil
	}
	select { // one caller polls; the others wait for its answer
	case b.waiting <- struct{}{}:
		defer func() { <-b.waiting }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.ready.Load() {
		return nil
	}
	want := b.o.Version
	start := time.Now()
	deadline := start.Add(b.o.VersionWait)
	waited := false
	for {
		card, url, err := b.served(ctx)
		if err != nil && refused(err) && ctx.Err() == nil && time.Now().Before(deadline) {
			// Not listening yet: a `drmas serve … &` started beside the stage is still
			// loading. It counts toward the same wait.
			if !waited {
				b.o.Logf("model %s: waiting up to %s for drmas serve at %s to answer (%v)", b.o.ID, b.o.VersionWait, b.shown, err)
				waited = true
			}
			if err := sleepCtx(ctx, min(versionPoll, time.Until(deadline))); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if card == nil || card.DrmasPolicyVersion == nil { // not drmas serve (vLLM, SGLang)
			b.ready.Store(true)
			return nil
		}
		v := *card.DrmasPolicyVersion
		what := "drmas serve"
		if card.DrmasRun != "" {
			what = fmt.Sprintf("drmas serve (run %s)", card.DrmasRun)
		}
		switch {
		case b.o.Run != "" && card.DrmasRun != "" && card.DrmasRun != b.o.Run:
			return fmt.Errorf("GET %s: drmas serve serves checkpoint step %d of run %s, but this stage samples from step %d of run %s: point the server at this run (--run %s) and store", url, v, card.DrmasRun, want, b.o.Run, b.o.Run)
		case v == want && b.o.CheckpointSHA256 != "" && card.DrmasCheckpointSHA256 != "" && card.DrmasCheckpointSHA256 != b.o.CheckpointSHA256:
			return fmt.Errorf("GET %s: %s serves a checkpoint step %d whose manifest has sha256 %s, but this stage samples from the one with sha256 %s: point the server at this run (--run) and store, or restart it if the run was recreated", url, what, v, card.DrmasCheckpointSHA256, b.o.CheckpointSHA256)
		case v == want:
			if waited {
				b.o.Logf("model %s: drmas serve at %s now serves checkpoint step %d (waited %s)", b.o.ID, b.shown, want, time.Since(start).Round(time.Millisecond))
			}
			b.ready.Store(true)
			return nil
		case v > want:
			return fmt.Errorf("GET %s: %s serves checkpoint step %d, newer than step %d that this stage samples from and records: it serves only its run's LATEST, so sample an older step with backend: local, and check that it serves this run (--run) and store", url, what, v, want)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("GET %s: %s still serves checkpoint step %d, want %d (waited %s, models.%s.openai.version_wait): is it serving this run (--run) and store, and polling LATEST (--poll)?", url, what, v, want, b.o.VersionWait, b.o.ID)
		}
		if !waited {
			b.o.Logf("model %s: waiting up to %s for drmas serve at %s to load checkpoint step %d (it serves step %d; it reloads LATEST every --poll)", b.o.ID, b.o.VersionWait, b.shown, want, v)
			waited = true
		}
		if err := sleepCtx(ctx, min(versionPoll, time.Until(deadline))); err != nil {
			return err
		}
	}
}

// sleepCtx waits d, or returns ctx's error when it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// dialError is a failed connection attempt. Its text is redacted, so the transport's own
// error is not in it; the *net.OpError of the dial (no URL, no key: the address it dialled)
// stays in the chain, so callers can tell which server to check (stages.Fail's hint).
type dialError struct {
	err error
	op  *net.OpError
}

func (e *dialError) Error() string   { return e.err.Error() }
func (e *dialError) Unwrap() []error { return []error{e.err, e.op} }

// refused reports whether err is a failure to connect (nothing listening yet), as opposed to
// a server that answered or a request that timed out.
func refused(err error) bool {
	var de *dialError
	return errors.As(err, &de)
}

// served returns the served model's card from GET /v1/models, or nil when the server does not
// describe it (a server that does not list the model, answers with a 4xx status, or sends
// something else than a model list). Connection errors, timeouts and 5xx fail as a completion
// request would.
func (b *Backend) served(ctx context.Context) (*ModelCard, string, error) {
	list, url, err := b.models(ctx)
	if err != nil {
		return nil, url, err
	}
	for i, c := range list.Data {
		if c.ID == b.o.ServerModel {
			return &list.Data[i], url, nil
		}
	}
	return nil, url, nil
}

// models is the server's GET /v1/models, empty when the server does not list its models (it
// answers with a 4xx status, or something else than a model list). Connection errors,
// timeouts and 5xx fail as a completion request would.
func (b *Backend) models(ctx context.Context) (*ModelList, string, error) {
	raw, url, err := b.do(ctx, http.MethodGet, "/v1/models", nil, 0)
	var se *statusError
	if errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests {
		return &ModelList{}, url, nil
	}
	if err != nil {
		return nil, url, err
	}
	var list ModelList
	if json.Unmarshal(raw, &list) != nil {
		return &ModelList{}, url, nil
	}
	return &list, url, nil
}

func ptr[T any](v T) *T { return &v }

// topK is a Sampling's top_k for a request body: nil when off, so that a server without the
// parameter (OpenAI's own API) never sees it.
func topK(k int) *int {
	if k <= 0 {
		return nil
	}
	return &k
}

// complete runs one /v1/completions request for reqs and fills out.
func (b *Backend) complete(ctx context.Context, reqs []actors.Request, s actors.Sampling, out []actors.Response) (*int64, error) {
	body := CompletionRequest{
		Model: b.model, MaxTokens: ptr(s.MaxTokens), Temperature: ptr(s.Temperature), TopP: ptr(s.TopP), TopK: topK(s.TopK),
		N: ptr(1), Logprobs: ptr(1), Seed: ptr(int64(reqs[0].Seed)),
		ReturnTokensAsTokenIDs: true, SkipSpecialTokens: ptr(false), StopTokenIDs: b.o.StopTokenIDs,
	}
	var err error
	if b.o.Batch {
		prompts := make([][]int32, len(reqs))
		body.DrmasSeeds = make([]uint64, len(reqs))
		for i, r := range reqs {
			prompts[i] = r.Prompt
			body.DrmasSeeds[i] = r.Seed
		}
		body.Prompt, err = json.Marshal(prompts)
	} else {
		body.Prompt, err = json.Marshal(reqs[0].Prompt)
	}
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("agent %s", reqs[0].Agent)
	if len(reqs) > 1 {
		what = fmt.Sprintf("batch of %d prompts", len(reqs))
	}
	raw, url, err := b.do(ctx, http.MethodPost, "/v1/completions", data, reqs[0].Seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var resp CompletionResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("%s: POST %s: malformed JSON response (%v): %s", what, url, err, excerpt(raw, b.o.APIKey))
	}
	if b.o.LoRAPath != "" && resp.Model != b.model {
		return nil, fmt.Errorf("%s: POST %s: sampled by model %s, but this stage samples with LoRA adapter %s (checkpoint step %d) and records that step: the server answered with another model", what, url, excerpt([]byte(resp.Model), b.o.APIKey), b.model, b.o.Version)
	}
	if b.o.Batch && len(reqs) > 1 && resp.DrmasPolicyVersion == nil && !resp.DrmasSeedsHonoured {
		return nil, fmt.Errorf("%s: POST %s: the server reports neither drmas_seeds_honoured nor drmas_policy_version, so it is not drmas serve and would not honour per-prompt seeds (drmas_seeds): set batch: false for vLLM and SGLang", what, url)
	}
	if v := resp.DrmasPolicyVersion; b.o.RequireVersion && v != nil && *v != b.o.Version {
		return nil, fmt.Errorf("%s: POST %s: sampled by checkpoint step %d, but this stage samples from and records step %d: the server loaded another checkpoint during the stage (did something else publish LATEST of its run, or does it serve another run?)", what, url, *v, b.o.Version)
	}
	if sha := resp.DrmasCheckpointSHA256; b.o.RequireVersion && b.o.CheckpointSHA256 != "" && sha != "" && sha != b.o.CheckpointSHA256 {
		return nil, fmt.Errorf("%s: POST %s: sampled by a checkpoint step %d whose manifest has sha256 %s, but this stage samples from the one with sha256 %s: the server was restarted on another run or store during the stage", what, url, b.o.Version, sha, b.o.CheckpointSHA256)
	}
	if err := parseChoices(resp.Choices, out, url); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return resp.DrmasPolicyVersion, nil
}

// parseChoices checks a completion response's choices and converts them into out.
func parseChoices(choices []CompletionChoice, out []actors.Response, url string) error {
	if len(choices) != len(out) {
		return fmt.Errorf("POST %s: %d choices for %d prompts (n=1)", url, len(choices), len(out))
	}
	seen := make([]bool, len(out))
	for _, c := range choices {
		if c.Index < 0 || c.Index >= len(out) || seen[c.Index] {
			return fmt.Errorf("POST %s: choice index %d is out of range or repeated (%d prompts)", url, c.Index, len(out))
		}
		seen[c.Index] = true
		lp := c.Logprobs
		if lp == nil || (len(lp.Tokens) == 0 && len(lp.TokenLogprobs) == 0 && c.Text != "") {
			return fmt.Errorf("POST %s: choice %d has no log-probs: the learner needs the behaviour log-prob of every token; the request asked for logprobs=1, so the server ignored it", url, c.Index)
		}
		if len(lp.Tokens) != len(lp.TokenLogprobs) {
			return fmt.Errorf("POST %s: choice %d has %d tokens but %d token_logprobs", url, c.Index, len(lp.Tokens), len(lp.TokenLogprobs))
		}
		r := actors.Response{Tokens: make([]int32, len(lp.Tokens)), LogProbs: make([]float32, len(lp.Tokens))}
		for i, t := range lp.Tokens {
			id, ok := ParseTokenID(t)
			if !ok {
				return fmt.Errorf("POST %s: choice %d token %d is %q, not \"token_id:N\": the server ignored return_tokens_as_token_ids=true (vLLM ≥ 0.5 honours it; drmas stores token ids exactly and never re-tokenises text)", url, c.Index, i, t)
			}
			if lp.TokenLogprobs[i].Null {
				return fmt.Errorf("POST %s: choice %d token %d has a null log-prob", url, c.Index, i)
			}
			r.Tokens[i], r.LogProbs[i] = id, lp.TokenLogprobs[i].V
		}
		if c.FinishReason != nil {
			r.FinishReason = *c.FinishReason
		}
		out[c.Index] = r
	}
	return nil
}

// chat runs one /v1/chat/completions request.
func (b *Backend) chat(ctx context.Context, r actors.Request, s actors.Sampling, out *actors.Response) error {
	body := ChatRequest{
		Model: b.o.ServerModel, Messages: []ChatMessage{{Role: "user", Content: PromptText(r)}},
		MaxTokens: ptr(s.MaxTokens), Temperature: ptr(s.Temperature), TopP: ptr(s.TopP), TopK: topK(s.TopK), N: ptr(1), Seed: ptr(int64(r.Seed)),
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	raw, url, err := b.do(ctx, http.MethodPost, "/v1/chat/completions", data, r.Seed)
	if err != nil {
		return fmt.Errorf("agent %s: %w", r.Agent, err)
	}
	var resp ChatResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("agent %s: POST %s: malformed JSON response (%v): %s", r.Agent, url, err, excerpt(raw, b.o.APIKey))
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message == nil {
		return fmt.Errorf("agent %s: POST %s: %d choices with a message, want 1", r.Agent, url, len(resp.Choices))
	}
	c := resp.Choices[0]
	*out = actors.Response{Tokens: model.Encode(c.Message.Content), ReEncoded: true}
	if c.FinishReason != nil {
		out.FinishReason = *c.FinishReason
	}
	if out.FinishReason == model.FinishStop {
		out.Tokens = append(out.Tokens, model.EOS)
	}
	return nil
}

// PromptText is the text of a request for chat mode: the prompt between the agent header
// (BOS, agent name, SEP) and the final SEP of actors.PromptIDs, special tokens dropped.
func PromptText(r actors.Request) string {
	ids := r.Prompt
	head := actors.PromptIDs(r.Agent, "")
	head = head[:len(head)-1]
	if len(ids) >= len(head)+1 && slices.Equal(ids[:len(head)], head) && ids[len(ids)-1] == model.SEP {
		ids = ids[len(head) : len(ids)-1]
	}
	return model.DecodeText(ids)
}

// statusError is a response with an HTTP status other than 200.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// errRetry marks a failure worth retrying.
type errRetry struct {
	err        error
	retryAfter time.Duration
}

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

// do sends one request (a JSON body, or none) with retries and returns the 200 response body
// and the URL.
func (b *Backend) do(ctx context.Context, method, path string, body []byte, seed uint64) ([]byte, string, error) {
	target, url := b.base+path, b.shown+path // url: what errors print
	for attempt := 0; ; attempt++ {
		raw, err := b.attempt(ctx, method, target, url, body)
		if err == nil {
			return raw, url, nil
		}
		var re *errRetry
		if !errors.As(err, &re) {
			return nil, url, err
		}
		if attempt >= b.o.Retries {
			if attempt > 0 {
				return nil, url, fmt.Errorf("%w (gave up after %d attempts)", re.err, attempt+1)
			}
			return nil, url, re.err
		}
		d := backoff(b.o.Backoff, attempt, b.o.JitterSeed, seed)
		if re.retryAfter > d {
			d = min(re.retryAfter, maxBackoff)
		}
		b.retries.Add(1)
		if err := sleepCtx(ctx, d); err != nil {
			return nil, url, err
		}
	}
}

// attempt makes one HTTP attempt.
func (b *Backend) attempt(ctx context.Context, method, target, url string, body []byte) ([]byte, error) {
	b.requests.Add(1)
	actx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if b.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.o.APIKey)
	}
	resp, err := b.client.Do(req)
	var raw []byte
	if err == nil {
		raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		_ = resp.Body.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) || actx.Err() != nil {
			return nil, fmt.Errorf("%s %s: no response within the timeout of %s (openai.timeout)", method, url, b.o.Timeout)
		}
		e := fmt.Errorf("%s %s: %v", method, url, redact(strings.ReplaceAll(err.Error(), b.base, b.shown), b.o.APIKey))
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			e = &dialError{err: e, op: op}
		}
		return nil, &errRetry{err: e}
	}
	if resp.StatusCode == http.StatusOK {
		return raw, nil
	}
	e := &statusError{status: resp.StatusCode, err: fmt.Errorf("%s %s: server error: HTTP %d %s: %s", method, url, resp.StatusCode, http.StatusText(resp.StatusCode), errorMessage(raw, b.o.APIKey))}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		var after time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return nil, &errRetry{err: e, retryAfter: after}
	}
	return nil, e
}

// backoff is base·2^attempt plus a jitter in [0, base·2^attempt) drawn from (seed, reqSeed,
// attempt): the same request retries on the same schedule every run.
func backoff(base time.Duration, attempt int, seed, reqSeed uint64) time.Duration {
	d := base << min(attempt, 16)
	if d > maxBackoff || d <= 0 {
		d = maxBackoff
	}
	x := splitmix(seed ^ splitmix(reqSeed^splitmix(uint64(attempt)+0x9e3779b97f4a7c15)))
	j := time.Duration(float64(d) * float64(x>>11) / (1 << 53))
	return min(d+j, maxBackoff)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// errorMessage extracts the message of an OpenAI-style ({"error":{"message"}}) or vLLM-style
// ({"message"}) error body, else an excerpt of the body.
func errorMessage(raw []byte, key string) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil {
		var d ErrorDetail
		if len(e.Error) > 0 && json.Unmarshal(e.Error, &d) == nil && d.Message != "" {
			return excerpt([]byte(d.Message), key)
		}
		if e.Message != "" {
			return excerpt([]byte(e.Message), key)
		}
	}
	return excerpt(raw, key)
}

// excerpt is the first 300 bytes of a body, quoted, with the key (if echoed) redacted.
func excerpt(raw []byte, key string) string {
	s := redact(string(raw), key) // before cutting: a key cut in half would not match
	if len(s) > 300 {
		// Cut before a character that the 300th byte is inside of; a body that is not
		// UTF-8 keeps its 300 bytes (strconv.Quote escapes them).
		n := 300
		for i := n - 1; i >= 0 && i > n-1-utf8.UTFMax; i-- {
			if utf8.RuneStart(s[i]) {
				if r, size := utf8.DecodeRuneInString(s[i:]); (r != utf8.RuneError || size > 1) && i+size > n {
					n = i
				}
				break
			}
		}
		s = s[:n] + "…"
	}
	if strings.TrimSpace(s) == "" {
		return "(empty body)"
	}
	return strconv.Quote(s)
}

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "<redacted>")
}
