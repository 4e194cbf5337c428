package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/internal/regular"
)

// ErrUnsupported marks a tokenizer.json whose shape this package does not implement; the
// error's text names the field.
var ErrUnsupported = errors.New("unsupported tokenizer")

// MaxAddedBytes bounds the content of added_tokens, all together: matching them builds a trie
// of a few tens of bytes per content byte, so this bounds the memory a tokenizer.json's added
// tokens can cost. Qwen's hold about 4 KiB, Llama 3's about 8 KiB.
const MaxAddedBytes = 1 << 20

// maxFileBytes bounds what LoadDir reads, with room above real tokenizer.json files.
const maxFileBytes = 256 << 20

// BPE is a loaded byte-level BPE tokenizer. It is safe for concurrent use.
type BPE struct {
	vocab        map[string]int32 // token spelling (byte-level alphabet) → id
	byteID       [256]int32       // id of each single byte's symbol, -1 when the vocabulary lacks it
	merges       map[uint64]uint64
	ignoreMerges bool
	nfc          bool
	digits       int // the longest run of numbers one pre-token holds (nextPiece)

	added     map[string]int32 // added token content → id
	rawMatch  *matcher         // added tokens with normalized=false, found in the raw text
	normMatch *matcher         // added tokens with normalized=true, found in the normalized text

	pieces    [][]byte // id → decoded bytes (a BPE token) or content (an added token)
	isAdded   []bool
	isSpecial []bool  // added tokens marked special
	special   []int32 // their ids, until buildPieces
	eos       int32
	bosToken  string // tokenizer_config.json's bos_token ("" = none)
	chat      chatTemplate

	cache wordCache
}

type jsonAddedToken struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type jsonModel struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  []json.RawMessage
}

type jsonTokenizer struct {
	AddedTokens  []jsonAddedToken `json:"added_tokens"`
	Normalizer   json.RawMessage  `json:"normalizer"`
	PreTokenizer json.RawMessage  `json:"pre_tokenizer"`
	Decoder      json.RawMessage  `json:"decoder"`
	Model        jsonModel        `json:"model"`
}

// component is the common shape of normalizers, pre-tokenizers and decoders.
type component struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        map[string]string `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
}

// LoadDir reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json. A chat
// template in DIR/chat_template.jinja (where newer transformers save it) is used when the
// config has none.
func LoadDir(dir string) (*BPE, error) { return LoadDirContext(context.Background(), dir) }

// LoadDirContext is LoadDir with reads that ctx cancels. Each file must be a regular file (or
// a symlink to one): a named pipe or a directory in its place is an error naming it.
func LoadDirContext(ctx context.Context, dir string) (*BPE, error) {
	tok, err := readBounded(ctx, filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := readOptional(ctx, filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	t, err := Load(tok, cfg)
	if err != nil || t.chat.present {
		return t, err
	}
	tmpl, err := readOptional(ctx, filepath.Join(dir, "chat_template.jinja"))
	if err != nil {
		return nil, err
	}
	t.setTemplate(string(tmpl))
	return t, nil
}

// readOptional is readBounded with a missing file read as nil.
func readOptional(ctx context.Context, path string) ([]byte, error) {
	b, err := readBounded(ctx, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func readBounded(ctx context.Context, path string) ([]byte, error) {
	b, err := regular.ReadFile(ctx, path, maxFileBytes)
	var tl *regular.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("tokenizer: %s is larger than %d MiB", path, maxFileBytes>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return b, nil
}

// Load builds a tokenizer from the bytes of tokenizer.json and tokenizer_config.json
// (tokenizerConfigJSON may be nil).
func Load(tokenizerJSON, tokenizerConfigJSON []byte) (*BPE, error) {
	var j jsonTokenizer
	if err := json.Unmarshal(tokenizerJSON, &j); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t := &BPE{}
	if err := t.loadModel(&j.Model); err != nil {
		return nil, err
	}
	steps := []func() error{
		func() error { return t.loadNormalizer(j.Normalizer, "normalizer") },
		func() error { return t.loadPreTokenizer(j.PreTokenizer, "pre_tokenizer") },
		func() error { return checkDecoder(j.Decoder) },
		func() error { return t.loadAdded(j.AddedTokens) },
		func() error { return t.loadConfig(tokenizerConfigJSON) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	t.cache.init()
	return t, nil
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("tokenizer.json: %s: %w", fmt.Sprintf(format, args...), ErrUnsupported)
}

func (t *BPE) loadModel(m *jsonModel) error {
	switch {
	case m.Type != "BPE":
		return unsupported("model.type %s (only BPE)", excerpt.Quote(m.Type))
	case m.Dropout != nil && *m.Dropout != 0:
		return unsupported("model.dropout %v (only null or 0)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return unsupported("model.continuing_subword_prefix %s (only empty)", excerpt.Quote(*m.ContinuingSubwordPrefix))
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return unsupported("model.end_of_word_suffix %s (only empty)", excerpt.Quote(*m.EndOfWordSuffix))
	case m.ByteFallback:
		return unsupported("model.byte_fallback true (only false)")
	case len(m.Vocab) == 0:
		return fmt.Errorf("tokenizer.json: model.vocab is empty")
	}
	t.ignoreMerges = m.IgnoreMerges
	t.vocab = make(map[string]int32, len(m.Vocab))
	for s, id := range m.Vocab {
		if id < 0 || id > maxID {
			return fmt.Errorf("tokenizer.json: model.vocab[%s] = %d is outside 0..%d", excerpt.Quote(s), id, maxID)
		}
		t.vocab[s] = int32(id)
	}
	for b := range t.byteID {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			id = -1
		}
		t.byteID[b] = id
		if !ok && m.UnkToken != nil {
			// Hugging Face would emit unk_token for the byte: not implemented.
			return unsupported("model.unk_token %s with no symbol for byte 0x%02x in model.vocab", excerpt.Quote(*m.UnkToken), b)
		}
	}
	return t.loadMerges(m.Merges)
}

// maxID bounds token ids so that id-indexed tables stay proportional to the file.
const maxID = 1<<31 - 2

func (t *BPE) loadMerges(raw []json.RawMessage) error {
	t.merges = make(map[uint64]uint64, len(raw))
	for rank, r := range raw {
		a, b, err := parseMerge(r)
		if err != nil {
			return fmt.Errorf("tokenizer.json: model.merges[%d]: %w", rank, err)
		}
		ida, oka := t.vocab[a]
		idb, okb := t.vocab[b]
		idm, okm := t.vocab[a+b]
		if !oka || !okb || !okm {
			return fmt.Errorf("tokenizer.json: model.merges[%d] (%s, %s): a token is not in model.vocab", rank, excerpt.Quote(a), excerpt.Quote(b))
		}
		// A pair listed twice keeps its last rank, as Hugging Face's map does.
		t.merges[pairKey(ida, idb)] = uint64(rank)<<32 | uint64(idm)
	}
	return nil
}

func pairKey(a, b int32) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

// parseMerge reads "a b" or ["a", "b"].
func parseMerge(r json.RawMessage) (string, string, error) {
	r = bytes.TrimSpace(r)
	if len(r) > 0 && r[0] == '"' {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return "", "", err
		}
		a, b, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("%s is not two tokens separated by one space", excerpt.Quote(s))
		}
		return a, b, nil
	}
	var p []string
	if err := json.Unmarshal(r, &p); err != nil || len(p) != 2 {
		return "", "", fmt.Errorf("not a \"a b\" string or a pair of strings")
	}
	return p[0], p[1], nil
}

func (t *BPE) loadNormalizer(raw json.RawMessage, field string) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: %s: %w", field, err)
	}
	switch c.Type {
	case "NFC":
		t.nfc = true
		return nil
	case "Sequence":
		for i, n := range c.Normalizers {
			if err := t.loadNormalizer(n, fmt.Sprintf("%s.normalizers[%d]", field, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return unsupported("%s.type %s (only NFC)", field, excerpt.Quote(c.Type))
}

// The Split regexes nextPiece implements, recognised by their text.
const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitPatterns maps each known Split regex to nextPiece's digits: Qwen2/2.5/3 split numbers
// one by one, Llama 3 (3.0 to 3.3) in groups of up to three.
var splitPatterns = map[string]int{qwenPattern: 1, llama3Pattern: 3}

const knownPatterns = "Qwen2/2.5/3's or Llama 3's"

func (t *BPE) loadPreTokenizer(raw json.RawMessage, field string) error {
	var c component
	if isNull(raw) {
		return unsupported("%s is null (only Split with %s regex, then ByteLevel)", field, knownPatterns)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: %s: %w", field, err)
	}
	if c.Type != "Sequence" || len(c.Pretokenizers) != 2 {
		return unsupported("%s.type %s (only a Sequence of Split with %s regex and ByteLevel)", field, excerpt.Quote(c.Type), knownPatterns)
	}
	var split, bl component
	if json.Unmarshal(c.Pretokenizers[0], &split) != nil || json.Unmarshal(c.Pretokenizers[1], &bl) != nil {
		return unsupported("%s.pretokenizers are not objects", field)
	}
	digits, known := splitPatterns[split.Pattern["Regex"]]
	switch {
	case split.Type != "Split":
		return unsupported("%s.pretokenizers[0].type %s (only Split)", field, excerpt.Quote(split.Type))
	case !known:
		return unsupported("%s.pretokenizers[0].pattern.Regex %s is not one this package implements (only %s)", field, excerpt.Quote(split.Pattern["Regex"]), knownPatterns)
	case split.Behavior != "Isolated" || split.Invert:
		return unsupported("%s.pretokenizers[0].behavior %s invert %v (only Isolated, false)", field, excerpt.Quote(split.Behavior), split.Invert)
	case bl.Type != "ByteLevel":
		return unsupported("%s.pretokenizers[1].type %s (only ByteLevel)", field, excerpt.Quote(bl.Type))
	case bl.AddPrefixSpace:
		return unsupported("%s.pretokenizers[1].add_prefix_space true (only false)", field)
	case bl.UseRegex == nil || *bl.UseRegex:
		return unsupported("%s.pretokenizers[1].use_regex (only false)", field)
	}
	t.digits = digits
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return unsupported("decoder.type %s (only ByteLevel)", excerpt.Quote(c.Type))
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

func (t *BPE) loadAdded(list []jsonAddedToken) error {
	t.added = make(map[string]int32, len(list))
	var raw, normed []addedToken
	total := 0
	for i, a := range list {
		total += len(a.Content)
		switch {
		case total > MaxAddedBytes:
			return fmt.Errorf("tokenizer.json: added_tokens: %d bytes of content by added_tokens[%d] (%d bytes); at most %d in all are supported (real tokenizers have a few KiB)", total, i, len(a.Content), MaxAddedBytes)
		case a.ID == nil || *a.ID < 0 || *a.ID > maxID:
			return fmt.Errorf("tokenizer.json: added_tokens[%d]: id missing or outside 0..%d", i, maxID)
		case a.Content == "":
			return fmt.Errorf("tokenizer.json: added_tokens[%d]: empty content", i)
		}
		at := addedToken{id: int32(*a.ID), content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		t.added[a.Content] = at.id
		if a.Special {
			t.special = append(t.special, at.id)
		}
		if a.Normalized {
			if t.nfc {
				at.content = nfc(at.content)
			}
			normed = append(normed, at)
		} else {
			raw = append(raw, at)
		}
	}
	t.rawMatch, t.normMatch = newMatcher(raw), newMatcher(normed)
	return t.buildPieces()
}

// buildPieces fills the id-indexed decode tables.
func (t *BPE) buildPieces() error {
	n := 0
	for _, id := range t.vocab {
		n = max(n, int(id)+1)
	}
	for _, id := range t.added {
		n = max(n, int(id)+1)
	}
	if total := len(t.vocab) + len(t.added); n > 2*total+1024 {
		return fmt.Errorf("tokenizer.json: ids are sparse (highest id %d for %d tokens)", n-1, total)
	}
	t.pieces = make([][]byte, n)
	t.isAdded = make([]bool, n)
	for s, id := range t.vocab {
		t.pieces[id] = byteLevelDecode(s)
	}
	for s, id := range t.added {
		t.pieces[id] = []byte(s)
		t.isAdded[id] = true
	}
	t.isSpecial = make([]bool, n)
	for _, id := range t.special {
		t.isSpecial[id] = true
	}
	t.special = nil
	return nil
}

// wordCache remembers the ids of short words; it is emptied when full, which bounds it.
type wordCache struct {
	mu sync.Mutex
	m  map[string][]int32
}

const (
	cacheWords   = 1 << 16
	cacheWordLen = 64
)

func (c *wordCache) init() { c.m = make(map[string][]int32) }

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.Lock()
	ids, ok := c.m[w]
	c.mu.Unlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	if len(w) > cacheWordLen {
		return
	}
	c.mu.Lock()
	if len(c.m) >= cacheWords {
		clear(c.m)
	}
	c.m[w] = ids
	c.mu.Unlock()
}
