package actors

import (
	"fmt"

	"github.com/drmas-dev/drmas/tokenizer"
)

// Tokenizer turns an agent's prompt into the ids its model reads and the ids it generates back
// into text, for one model. The built-in policy uses Bytes; a Hugging Face model (Qwen) uses
// Chat over its tokenizer.json and chat template.
type Tokenizer interface {
	// PromptIDs is the token sequence agent sees for prompt.
	PromptIDs(agent, prompt string) ([]int32, error)
	// TargetIDs is the token sequence of an expert response, ending with the model's EOS.
	TargetIDs(response string) []int32
	// ResponseText decodes generated ids to the text a workflow parses, special tokens dropped.
	ResponseText(tokens []int32) string
}

// Tokenized is implemented by backends whose model has its own tokenizer.
type Tokenized interface {
	Tokenizer() Tokenizer
}

// TokenizerOf returns b's tokenizer: its own when it implements Tokenized, else Bytes (the
// built-in policy's, which the openai backend's byte-level ids also use).
func TokenizerOf(b Backend) Tokenizer {
	if t, ok := b.(Tokenized); ok {
		return t.Tokenizer()
	}
	return Bytes{}
}

// Bytes is the built-in policy's fixed 264-id tokenizer: PromptIDs, TargetIDs and
// ResponseText of this package.
type Bytes struct{}

// PromptIDs implements Tokenizer.
func (Bytes) PromptIDs(agent, prompt string) ([]int32, error) { return PromptIDs(agent, prompt), nil }

// TargetIDs implements Tokenizer.
func (Bytes) TargetIDs(response string) []int32 { return TargetIDs(response) }

// ResponseText implements Tokenizer.
func (Bytes) ResponseText(tokens []int32) string { return ResponseText(tokens) }

// Chat is a Hugging Face byte-level BPE tokenizer with its model's chat template: an agent's
// prompt is one user turn followed by the generation prompt (for Qwen3 with thinking off, and
// Qwen2.5's default system message), as a chat server would render it. The agent's name is not
// added: the workflows' prompts say which role the agent plays.
type Chat struct {
	BPE *tokenizer.BPE
	// Date is the "Today Date" of a Llama 3.1+ template's system preamble ("" =
	// tokenizer.DefaultChatDate); other templates do not write it.
	Date string
}

// Prompt renders msgs through the chat template, ending with the generation prompt.
func (c Chat) Prompt(msgs []tokenizer.Message) (string, error) {
	return c.BPE.ChatPromptWith(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, Date: c.Date})
}

// PromptIDs implements Tokenizer.
func (c Chat) PromptIDs(agent, prompt string) ([]int32, error) {
	text, err := c.Prompt([]tokenizer.Message{{Role: "user", Content: prompt}})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", agent, err)
	}
	return c.BPE.Encode(text), nil
}

// TargetIDs implements Tokenizer: the response's ids and the end-of-turn id.
func (c Chat) TargetIDs(response string) []int32 {
	ids := c.BPE.Encode(response)
	if eos := c.BPE.EOS(); eos >= 0 {
		ids = append(ids, eos)
	}
	return ids
}

// ResponseText implements Tokenizer.
func (c Chat) ResponseText(tokens []int32) string {
	kept := make([]int32, 0, len(tokens))
	for _, id := range tokens {
		if !c.BPE.IsSpecial(id) {
			kept = append(kept, id)
		}
	}
	return c.BPE.Decode(kept)
}
