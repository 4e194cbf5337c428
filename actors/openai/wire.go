package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The wire format of the OpenAI completions API as vLLM and SGLang serve it, shared by the
// client (Backend) and the server (package serve). Fields drmas adds are prefixed drmas_;
// other servers ignore them in requests and never send them in responses.

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model string `json:"model"`
	// Prompt is a string, a list of strings, a list of token ids, or a list of token-id lists.
	Prompt      json.RawMessage `json:"prompt"`
	MaxTokens   *int            `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	// TopK is vLLM's extra sampling parameter (0 or -1: off), sent only when set.
	TopK *int `json:"top_k,omitempty"`
	N    *int `json:"n,omitempty"`
	// Logprobs asks for the log-probs of the sampled token plus this many alternatives
	// (vLLM: 0 and 1 both return the sampled token's log-prob).
	Logprobs *int `json:"logprobs,omitempty"`
	// Seed seeds the request's sampling (a signed 64-bit integer on the wire; drmas seeds are
	// unsigned and travel as their two's-complement bit pattern).
	Seed   *int64 `json:"seed,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	Echo   bool   `json:"echo,omitempty"`
	// vLLM extensions.
	ReturnTokensAsTokenIDs bool  `json:"return_tokens_as_token_ids,omitempty"`
	SkipSpecialTokens      *bool `json:"skip_special_tokens,omitempty"`
	// StopTokenIDs end a sample when drawn, beside the model's EOS (vLLM's stop_token_ids;
	// the stop token is returned with its log-prob).
	StopTokenIDs []int32 `json:"stop_token_ids,omitempty"`
	// DrmasSeeds gives one seed per prompt (drmas serve only).
	DrmasSeeds []uint64 `json:"drmas_seeds,omitempty"`
}

// CompletionResponse is the body of a successful POST /v1/completions.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
	// DrmasPolicyVersion is the checkpoint step that served the request (drmas serve only).
	DrmasPolicyVersion *int64 `json:"drmas_policy_version,omitempty"`
	// DrmasCheckpointSHA256 is the sha256 of that checkpoint's manifest (drmas serve only).
	DrmasCheckpointSHA256 string `json:"drmas_checkpoint_sha256,omitempty"`
	// DrmasSeedsHonoured says the server sampled each prompt with its drmas_seeds seed (drmas
	// serve, also when it serves an HF folder and reports no policy version).
	DrmasSeedsHonoured bool `json:"drmas_seeds_honoured,omitempty"`
}

// CompletionChoice is one generated continuation.
type CompletionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// Logprobs is a choice's per-token detail. With return_tokens_as_token_ids, Tokens are
// "token_id:N" strings.
type Logprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []LogProb            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]LogProb `json:"top_logprobs"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails is OpenAI's breakdown of the prompt tokens: CachedTokens of them were
// taken from the server's prefix cache instead of being prefilled.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model       string        `json:"model"`
	Messages    []ChatMessage `json:"messages"`
	MaxTokens   *int          `json:"max_tokens,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	TopK        *int          `json:"top_k,omitempty"` // as CompletionRequest's
	N           *int          `json:"n,omitempty"`
	Seed        *int64        `json:"seed,omitempty"`
}

// ChatMessage is one chat turn.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatResponse is the body of a successful POST /v1/chat/completions.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatChoice is one chat answer.
type ChatChoice struct {
	Index        int          `json:"index"`
	Message      *ChatMessage `json:"message"`
	FinishReason *string      `json:"finish_reason"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string      `json:"object"` // "list"
	Data   []ModelCard `json:"data"`
}

// ModelCard describes one served model.
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"` // "model"
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Root is where the model was loaded from (vLLM: a LoRA adapter's lora_path); Parent is
	// the base model of an adapter, null for a base model.
	Root               string  `json:"root,omitempty"`
	Parent             *string `json:"parent"`
	DrmasPolicyVersion *int64  `json:"drmas_policy_version,omitempty"`
	// DrmasRun and DrmasCheckpointSHA256 name the checkpoint served (drmas serve only): its
	// run, and the sha256 of its manifest (what a rollout manifest records of its input).
	DrmasRun              string `json:"drmas_run,omitempty"`
	DrmasCheckpointSHA256 string `json:"drmas_checkpoint_sha256,omitempty"`
}

// LoadLoRAAdapterRequest is the body of POST /v1/load_lora_adapter (vLLM's dynamic LoRA API,
// served when VLLM_ALLOW_RUNTIME_LORA_UPDATING is set, and by drmas serve --hf). A success is
// HTTP 200 with a plain-text body.
type LoadLoRAAdapterRequest struct {
	LoRAName string `json:"lora_name"`
	LoRAPath string `json:"lora_path"`
}

// UnloadLoRAAdapterRequest is the body of POST /v1/unload_lora_adapter.
type UnloadLoRAAdapterRequest struct {
	LoRAName string `json:"lora_name"`
}

// ErrorResponse is the body of a failed request, as OpenAI sends it.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes a failure.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

// LogProb is one log-prob on the wire: a number, or null (vLLM sends null for a prompt's first
// token). It is written with float32 precision (the shortest decimal that reads back as the
// same float32) and read back as float32, so values round-trip bit for bit.
type LogProb struct {
	V    float32
	Null bool
}

// MarshalJSON implements json.Marshaler. -Inf becomes -9999 as in vLLM; NaN becomes null.
func (l LogProb) MarshalJSON() ([]byte, error) {
	v := float64(l.V)
	switch {
	case l.Null || math.IsNaN(v):
		return []byte("null"), nil
	case math.IsInf(v, 0):
		v = math.Copysign(9999, v)
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 32), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *LogProb) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*l = LogProb{Null: true}
		return nil
	}
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return fmt.Errorf("log-prob %s is not a number", s)
	}
	*l = LogProb{V: float32(f)}
	return nil
}

// TokenIDPrefix starts the tokens vLLM returns with return_tokens_as_token_ids.
const TokenIDPrefix = "token_id:"

// TokenIDString renders a token id as vLLM does with return_tokens_as_token_ids.
func TokenIDString(id int32) string { return TokenIDPrefix + strconv.FormatInt(int64(id), 10) }

// ParseTokenID parses a "token_id:N" token string.
func ParseTokenID(s string) (int32, bool) {
	rest, ok := strings.CutPrefix(s, TokenIDPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}
