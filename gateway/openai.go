package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/actors"
)

// apiError is an OpenAI error body ({"error": {…}}) and its HTTP status.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code,omitempty"`
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]*apiError{"error": e})
}

// request is what the gateway reads of a chat or completions request; other fields are
// accepted and ignored (sampling is the rollout's, so the learner scores what was sampled).
type request struct {
	Model         string            `json:"model"`
	Messages      []message         `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	Prompt        json.RawMessage   `json:"prompt"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int  `json:"max_tokens"`
	MaxCompletionTokens int  `json:"max_completion_tokens"`
	N                   *int `json:"n"`
}

// serve routes /e/<episode>/v1/{chat/completions,completions,models}.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	e, route, aerr := g.episode(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	switch {
	case route == "/v1/models" && r.Method == http.MethodGet:
		g.models(w)
	case (route == "/v1/chat/completions" || route == "/v1/completions") && r.Method == http.MethodPost:
		select {
		case g.inFlight <- struct{}{}:
			defer func() { <-g.inFlight }()
		case <-r.Context().Done():
			return
		}
		g.complete(w, r, e, route == "/v1/chat/completions")
	default:
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("%s %s: the gateway serves POST /v1/chat/completions, POST /v1/completions and GET /v1/models", r.Method, route)})
	}
}

func (g *Gateway) models(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]model, len(g.agents))
	for i, a := range g.agents {
		data[i] = model{ID: a, Object: "model", OwnedBy: "drmas"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// complete serves one chat or completions call: read, render, sample, record, answer.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request, e *Episode, chat bool) {
	var req request
	body := http.MaxBytesReader(w, r.Body, g.cfg.MaxBody)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		writeError(w, badRequest("the request body is not valid JSON: %v", err))
		return
	}
	be, ok := g.cfg.Agents[req.Model]
	if !ok {
		param := "model"
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Param: &param, Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it. The models are the agents: %s.", req.Model, strings.Join(g.agents, ", "))})
		return
	}
	if req.N != nil && *req.N != 1 {
		writeError(w, badRequest("n: %d, the gateway samples one choice per call", *req.N))
		return
	}
	promptText, ids, aerr := render(be, req, chat)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	idx, aerr := e.begin()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer e.wg.Done()
	s := g.cfg.Sampling
	for _, m := range []int{req.MaxTokens, req.MaxCompletionTokens} {
		if m > 0 && m < s.MaxTokens {
			s.MaxTokens = m
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(e.ctx, cancel)()
	resp, err := g.generate(ctx, be, actors.Request{Agent: req.Model, Prompt: ids, Seed: e.seed(idx)}, s)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, context.Canceled) {
			status = http.StatusServiceUnavailable
		}
		writeError(w, &apiError{status: status, Type: "server_error", Message: err.Error()})
		return
	}
	text := jsonText(actors.TokenizerOf(be).ResponseText(resp.Tokens))
	e.record(Call{Index: idx, Agent: req.Model, Model: be.Model(), Version: be.Version(), PromptText: promptText,
		PromptIDs: ids, Response: resp, Text: text})
	a := answer{id: fmt.Sprintf("%s-%s-%d", map[bool]string{true: "chatcmpl", false: "cmpl"}[chat], e.id, idx),
		model: req.Model, text: text, finish: resp.FinishReason, created: time.Now().Unix(),
		promptTokens: len(ids), completionTokens: len(resp.Tokens)}
	if chat && len(req.Tools) > 0 {
		if content, calls, ok := parseToolCalls(text, fmt.Sprintf("call_%s_%d", e.id, idx)); ok {
			a.text, a.calls, a.finish = content, calls, "tool_calls"
		}
	}
	usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	switch {
	case req.Stream:
		a.stream(w, chat, usage)
	case chat:
		writeJSON(w, http.StatusOK, a.chatBody())
	default:
		writeJSON(w, http.StatusOK, a.completionBody())
	}
}

// render is a call's prompt: the chat messages through the agent's model's chat template, or
// a completions prompt as it is.
func render(be actors.Backend, req request, chat bool) (string, []int32, *apiError) {
	tok := actors.TokenizerOf(be)
	var text string
	if chat {
		if len(req.Messages) == 0 {
			return "", nil, badRequest("messages: empty")
		}
		msgs, err := chatMessages(req.Messages, req.Tools)
		if err != nil {
			return "", nil, badRequest("%v", err)
		}
		if c, ok := tok.(actors.Chat); ok {
			text, err = c.Prompt(msgs)
			if err != nil {
				return "", nil, badRequest("%v", err)
			}
			return text, c.BPE.Encode(text), nil
		}
		// The built-in policy has no chat template: the turns as lines, in its prompt format.
		lines := make([]string, len(msgs))
		for i, m := range msgs {
			lines[i] = m.Role + ": " + m.Content
		}
		text = strings.Join(lines, "\n")
	} else {
		var list []string
		if err := json.Unmarshal(req.Prompt, &text); err != nil {
			if err := json.Unmarshal(req.Prompt, &list); err != nil || len(list) != 1 {
				return "", nil, badRequest("prompt: want a string (or a list of one string)")
			}
			text = list[0]
		}
		if c, ok := tok.(actors.Chat); ok {
			return text, c.BPE.Encode(text), nil
		}
	}
	ids, err := tok.PromptIDs(req.Model, text)
	if err != nil {
		return "", nil, badRequest("%v", err)
	}
	return text, ids, nil
}

// answer is a sampled call as the client receives it.
type answer struct {
	id, model, text, finish        string
	calls                          []toolCall
	created                        int64
	promptTokens, completionTokens int
}

func (a answer) usage() map[string]int {
	return map[string]int{"prompt_tokens": a.promptTokens, "completion_tokens": a.completionTokens,
		"total_tokens": a.promptTokens + a.completionTokens}
}

func (a answer) message() map[string]any {
	m := map[string]any{"role": "assistant", "content": a.text}
	if len(a.calls) > 0 {
		m["tool_calls"] = a.calls
		if a.text == "" {
			m["content"] = nil
		}
	}
	return m
}

func (a answer) chatBody() map[string]any {
	return map[string]any{"id": a.id, "object": "chat.completion", "created": a.created, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "message": a.message(), "logprobs": nil, "finish_reason": a.finish}},
		"usage":   a.usage()}
}

func (a answer) completionBody() map[string]any {
	return map[string]any{"id": a.id, "object": "text_completion", "created": a.created, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "text": a.text, "logprobs": nil, "finish_reason": a.finish}},
		"usage":   a.usage()}
}

// stream writes the answer as server-sent events: the content (and calls) in one chunk, the
// finish reason in the next, the usage when asked, then [DONE].
func (a answer) stream(w http.ResponseWriter, chat, usage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	chunk := func(choices []any, extra map[string]any) {
		c := map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model, "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		data, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	if chat {
		delta := map[string]any{"role": "assistant", "content": a.text}
		if len(a.calls) > 0 {
			calls := make([]map[string]any, len(a.calls))
			for i, c := range a.calls {
				calls[i] = map[string]any{"index": i, "id": c.ID, "type": c.Type, "function": c.Function}
			}
			delta["tool_calls"] = calls
		}
		chunk([]any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nil}}, nil)
		chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": a.finish}}, nil)
	} else {
		chunk([]any{map[string]any{"index": 0, "text": a.text, "logprobs": nil, "finish_reason": nil}}, nil)
		chunk([]any{map[string]any{"index": 0, "text": "", "logprobs": nil, "finish_reason": a.finish}}, nil)
	}
	if usage {
		chunk([]any{}, map[string]any{"usage": a.usage()})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// jsonText is s as a JSON string carries it: each byte of an invalid UTF-8 sequence becomes
// U+FFFD (as encoding/json writes it), so a call's recorded text is the text its client reads.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
