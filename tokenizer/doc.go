// Package tokenizer is a pure-Go byte-level BPE tokenizer and chat-prompt renderer for the
// Qwen2 / Qwen2.5 / Qwen3 and Llama 3 families, read from a Hugging Face folder's
// tokenizer.json and tokenizer_config.json. It gives the ids Hugging Face's tokenizer gives
// (checked id for id against HF's own JS tokenizer on the real Qwen3 and Llama 3 files),
// without Python or cgo.
//
// API:
//
//	LoadDir(dir)                 reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json
//	                             (and DIR/chat_template.jinja when the config has no chat_template)
//	Load(tokJSON, cfgJSON)       the same from bytes; cfgJSON may be nil
//	(*BPE).Encode(text)          ids; no special tokens are added
//	(*BPE).Decode(ids)           text
//	(*BPE).VocabSize()           highest id + 1 over the BPE vocabulary and the added tokens
//	(*BPE).TokenID(s)            the id of a token by its tokenizer.json spelling
//	(*BPE).EOS()                 the end-of-turn id for chat (<|im_end|>, Llama 3's <|eot_id|>)
//	(*BPE).IsSpecial(id)         whether id is an added token marked special
//	(*BPE).ChatPrompt(msgs, gen) the prompt the model's chat template renders (ChatML, Llama 3)
//
// Encode follows the pipeline of tokenizer.json: added tokens (special or not) are found in
// the text first, leftmost and longest first, honouring each token's lstrip, rstrip,
// single_word and normalized flags, and become their ids; so "<|im_end|>" written in the text
// is one id, as with Hugging Face's tokenizer. The text between them is NFC-normalized (when
// the normalizer says so: Qwen's does, Llama 3's has none), split by the pre-tokenizer pattern
// (a hand-written splitter equal to the regex, lookahead `\s+(?!\S)` included; Qwen's pattern
// cuts numbers one by one, Llama 3's, otherwise the same, in groups of up to three), mapped
// byte by byte to GPT-2's byte-level alphabet and merged by
// merge rank (lowest rank first, leftmost first among equal ranks). Invalid UTF-8 in the input
// is read as U+FFFD, byte by byte, as Go's range over a string reads it. Letter, number and
// space classes come from Go's Unicode tables (unicode.Version, 15.0 with Go 1.26): a code
// point assigned in a later Unicode version (CJK Extension I, 15.1) is "other" here and may be
// split differently from a tokenizer built on newer tables.
//
// Decode maps every id to its token: an added token's text verbatim, a BPE token's bytes
// through the inverse byte-level map, invalid UTF-8 replaced by U+FFFD per maximal invalid
// subsequence (as Rust's from_utf8_lossy and the WHATWG decoder do). Ids that name no token
// are skipped.
//
// Decode never applies clean_up_tokenization_spaces (which Llama 3's tokenizer_config.json
// turns on in Hugging Face's decode, turning " ." into "."): it returns the tokens' text.
//
// Round trip, precisely: for every valid UTF-8 string s, Decode(Encode(s)) is s with the added
// tokens found in it kept as written and every stretch of text between them in NFC (full NFC,
// as Hugging Face's normalizer and JS's String.prototype.normalize compute it: no U+034F is
// inserted into long runs of combining marks). Hugging Face normalizes those stretches, not
// the whole text, so this equals NFC(s) except where a stretch starts with a combining mark
// that NFC(s) would compose with the token's last character (">" + U+0338 is "≯"); ids and
// decoded text then still equal Hugging Face's. It holds for tokenizers whose added tokens
// have no lstrip/rstrip (those swallow whitespace) and are written in NFC, as all of Qwen's.
// Without a normalizer (Llama 3), Decode(Encode(s)) is s.
//
// Supported tokenizer.json shapes, anything else is refused with a one-line error naming the
// field: model BPE (merges as "a b" strings or [a, b] pairs; dropout null or 0; no
// continuing_subword_prefix or end_of_word_suffix; byte_fallback false; ignore_merges either
// way); normalizer null or NFC (alone or in a Sequence); pre_tokenizer
// Sequence[Split(Qwen's or Llama 3's pattern, recognised by its text, Isolated), ByteLevel(use_regex
// false, no add_prefix_space)] (any other Split regex is refused, quoted);
// decoder null or ByteLevel; unk_token only when every byte has its symbol; ids non-negative
// and dense (highest id below twice the token count + 1024). The post_processor is ignored:
// Encode adds no special tokens. Memory is bounded by the size of the files (they are parsed
// once; LoadDir refuses files over 256 MiB) and by the text (the word cache holds at most
// 65,536 words of at most 64 bytes). A *BPE is safe for concurrent use.
//
// ChatPrompt renders Qwen's ChatML, or Llama 3's header turns, as the templates in
// tokenizer_config.json do for messages with a role and a content; see its doc for the Qwen3,
// Qwen2.5 and Llama 3 variants. Llama 3.1 and later templates (a dated system preamble) are
// refused.
package tokenizer
