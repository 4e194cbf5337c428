package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/internal/regular"
)

// maxTokenizerBytes bounds tokenizer.json (Qwen's is 11 MB).
const maxTokenizerBytes = 256 << 20

// TokenizerInfo summarizes a folder's tokenizer files without building the tokenizer.
type TokenizerInfo struct {
	Files  []string       // the TokenizerFiles present
	Model  string         // tokenizer.json's model.type (BPE)
	Vocab  int            // tokens of model.vocab
	Added  int            // added_tokens whose ids are not in model.vocab
	MaxID  int            // the largest id of either (-1 if none)
	Tokens map[string]int // added_tokens by content
}

// Size is the number of distinct token ids.
func (t TokenizerInfo) Size() int { return t.Vocab + t.Added }

// ReadTokenizerInfo reads dir's tokenizer.json (if any) and lists the tokenizer files present.
func ReadTokenizerInfo(dir string) (TokenizerInfo, error) {
	return ReadTokenizerInfoContext(context.Background(), dir)
}

// ReadTokenizerInfoContext is ReadTokenizerInfo with reads that ctx cancels. A tokenizer file
// that is there but is not a regular file is an error naming it.
func ReadTokenizerInfoContext(ctx context.Context, dir string) (TokenizerInfo, error) {
	info := TokenizerInfo{MaxID: -1, Tokens: map[string]int{}}
	for _, name := range TokenizerFiles {
		err := regular.Check(filepath.Join(dir, name))
		if err == nil {
			info.Files = append(info.Files, name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return info, fileErr(filepath.Join(dir, name), err)
		}
	}
	name := filepath.Join(dir, "tokenizer.json")
	data, err := readBounded(ctx, name, maxTokenizerBytes)
	if errors.Is(err, os.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return info, err
	}
	var tj struct {
		Model struct {
			Type  string         `json:"type"`
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		return info, formatErr(name, "not a tokenizer.json: "+err.Error())
	}
	info.Model, info.Vocab = tj.Model.Type, len(tj.Model.Vocab)
	ids := make(map[int]bool, len(tj.Model.Vocab))
	for tok, id := range tj.Model.Vocab {
		if id < 0 || ids[id] {
			return info, formatErr(name, fmt.Sprintf("model.vocab gives %s the id %d, negative or taken", excerpt.Quote(tok), id))
		}
		ids[id] = true
		info.MaxID = max(info.MaxID, id)
	}
	for _, t := range tj.AddedTokens {
		if t.ID < 0 {
			return info, formatErr(name, fmt.Sprintf("added token %s has the id %d", excerpt.Quote(t.Content), t.ID))
		}
		info.Tokens[t.Content] = t.ID
		info.MaxID = max(info.MaxID, t.ID)
		if !ids[t.ID] {
			ids[t.ID] = true
			info.Added++
		}
	}
	return info, nil
}
