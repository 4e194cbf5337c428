// Package gateway is an OpenAI-compatible HTTP gateway in front of drmas's actor backends, for
// agent programs (the "program" workflow): each episode gets its own address and token on
// 127.0.0.1; a request's model names an agent; each call renders the messages with that
// agent's model's chat template, samples with the agent's backend, seeded per episode and
// call, and is recorded as one Call (prompt ids, response ids, log-probs), the stuff of one
// trajectory row. Run plays a program's episodes through it.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drmas-dev/drmas/actors"
)

// Call is one recorded model call of an episode.
type Call struct {
	Index      int // the call's index in its episode, in order of arrival
	Agent      string
	Model      string
	Version    int64
	PromptText string
	PromptIDs  []int32
	Response   actors.Response
	// Text is what the client received: the decoded response ids (special tokens dropped), each
	// byte of an invalid UTF-8 sequence as U+FFFD, as the JSON answer carries it.
	Text string
}

// Config configures a Gateway.
type Config struct {
	// Agents maps each agent (a request's model) to its backend.
	Agents map[string]actors.Backend
	// Sampling is every call's sampling; a request's max_tokens may only lower MaxTokens.
	Sampling actors.Sampling
	// MaxCalls bounds an episode's calls; a call past it is refused and the episode marked.
	MaxCalls int
	// MaxBody bounds a request body in bytes; 0: 4 MiB.
	MaxBody int64
	// MaxInFlight bounds the calls being served at once over all episodes; 0: 256. A call past
	// it waits.
	MaxInFlight int
	// MaxBatch bounds the calls a model generates together; 0: 64.
	MaxBatch int
}

// Gateway serves episodes' calls on 127.0.0.1.
type Gateway struct {
	cfg      Config
	srv      *http.Server
	ln       net.Listener
	agents   []string
	batchers map[string]*batcher // by model id: a backend generates one batch at a time
	inFlight chan struct{}

	mu       sync.Mutex
	episodes map[string]*Episode
}

// Start starts a gateway on a free port of 127.0.0.1.
func Start(cfg Config) (*Gateway, error) {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 64
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway: listen: %w", err)
	}
	g := &Gateway{cfg: cfg, ln: ln, batchers: map[string]*batcher{}, episodes: map[string]*Episode{},
		inFlight: make(chan struct{}, cfg.MaxInFlight)}
	for a, be := range cfg.Agents {
		g.agents = append(g.agents, a)
		if g.batchers[be.Model()] == nil {
			g.batchers[be.Model()] = &batcher{be: be, max: cfg.MaxBatch, queue: map[actors.Sampling][]*pending{}}
		}
	}
	sort.Strings(g.agents)
	g.srv = &http.Server{Handler: http.HandlerFunc(g.serve), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// Close stops the gateway, ending every open episode.
func (g *Gateway) Close() error {
	g.mu.Lock()
	eps := make([]*Episode, 0, len(g.episodes))
	for _, e := range g.episodes {
		eps = append(eps, e)
	}
	g.mu.Unlock()
	for _, e := range eps {
		e.Close()
	}
	return g.srv.Close()
}

// Open opens an episode whose call i samples with seed(i).
func (g *Gateway) Open(seed func(call int) uint64) *Episode {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Episode{g: g, id: randomHex(12), token: "drmas-" + randomHex(24), seed: seed, ctx: ctx, cancel: cancel}
	g.mu.Lock()
	g.episodes[e.id] = e
	g.mu.Unlock()
	return e
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// Episode is one episode's address, token and recorded calls.
type Episode struct {
	g         *Gateway
	id, token string
	seed      func(int) uint64
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu       sync.Mutex
	next     int  // the next call's index
	closed   bool // the token is no longer valid
	overflow bool // a call past MaxCalls was refused
	calls    []Call
}

// BaseURL is the episode's OpenAI base URL (OPENAI_BASE_URL), ending in /v1.
func (e *Episode) BaseURL() string { return fmt.Sprintf("http://%s/e/%s/v1", e.g.ln.Addr(), e.id) }

// Token is the episode's API key (OPENAI_API_KEY).
func (e *Episode) Token() string { return e.token }

// Close ends the episode: its token stops working, calls in flight are cancelled, and it
// returns the calls recorded, by index, and whether a call past MaxCalls was refused.
func (e *Episode) Close() (calls []Call, overflow bool) {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	e.g.mu.Lock()
	delete(e.g.episodes, e.id)
	e.g.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	sort.Slice(e.calls, func(i, j int) bool { return e.calls[i].Index < e.calls[j].Index })
	return e.calls, e.overflow
}

// begin admits a call: its index, or an error for a closed episode or one past MaxCalls.
func (e *Episode) begin() (int, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errInvalidKey()
	}
	if e.next >= e.g.cfg.MaxCalls {
		e.overflow = true
		// 400, not 429: clients retry a 429, and no retry can succeed.
		return 0, &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Code: "max_calls",
			Message: fmt.Sprintf("the episode made more than workflow.max_calls (%d) calls", e.g.cfg.MaxCalls)}
	}
	e.wg.Add(1)
	e.next++
	return e.next - 1, nil
}

func (e *Episode) record(c Call) {
	e.mu.Lock()
	e.calls = append(e.calls, c)
	e.mu.Unlock()
}

// episode finds the episode of a path /e/<id>/… and checks the request's token.
func (g *Gateway) episode(r *http.Request) (*Episode, string, *apiError) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/e/")
	if !ok {
		return nil, "", &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Message: "unknown path " + r.URL.Path}
	}
	id, route, _ := strings.Cut(rest, "/")
	g.mu.Lock()
	e := g.episodes[id]
	g.mu.Unlock()
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if e == nil || subtle.ConstantTimeCompare([]byte(key), []byte(e.token)) != 1 {
		return nil, "", errInvalidKey()
	}
	return e, "/" + route, nil
}

func errInvalidKey() *apiError {
	return &apiError{status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "Incorrect API key provided: the key is valid for one running episode only"}
}

// generate samples one call with the agent's backend, batched with the other calls waiting
// for the same model.
func (g *Gateway) generate(ctx context.Context, be actors.Backend, req actors.Request, s actors.Sampling) (actors.Response, error) {
	return g.batchers[be.Model()].generate(ctx, req, s)
}
