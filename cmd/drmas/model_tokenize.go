package main

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/tokenizer"
)

func newModelTokenizeCmd() *cobra.Command {
	var modelDir, cache, text string
	cmd := &cobra.Command{
		Use:   "tokenize --model DIR --text STRING",
		Short: "Print the token ids of a text as a JSON array",
		Long: `Tokenizes --text with the model folder's tokenizer.json (and tokenizer_config.json), as Hugging
Face's tokenizer does with add_special_tokens=False, and prints the ids as a JSON array on one
line. --text must be valid UTF-8 (Hugging Face's tokenizers take Unicode text; an invalid byte
would otherwise be read as U+FFFD). No special tokens are added (no BOS, no chat template); text of an added or special token
written in --text, such as <|im_end|>, becomes that token's id. An empty --text prints [].`,
		Example: `  drmas model tokenize --model ~/models/Qwen3-0.6B --text 'Hello world<|im_end|>'
  [9707,1879,151645]`,
		Args: cobra.NoArgs,
		RunE: interruptibleRunE(func(cmd *cobra.Command, _ []string) error {
			if err := noTilde(cmd, "model", "cache"); err != nil {
				return err
			}
			if err := checkUTF8(text); err != nil {
				return err
			}
			dir, err := localModel(cmd, modelDir, cache)
			if err != nil {
				return err
			}
			tok, err := tokenizer.LoadDirContext(cmd.Context(), dir)
			if err != nil {
				return fmt.Errorf("--model %s: %w", modelDir, err)
			}
			ids := tok.Encode(text)
			if ids == nil {
				ids = []int32{} // [] rather than null
			}
			js, err := json.Marshal(ids)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", js)
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "model folder with tokenizer.json: a local path, or s3://… / file://… in the store (required)")
	f.StringVar(&text, "text", "", "the text to tokenize, taken as is (required; may be empty)")
	f.StringVar(&cache, "cache", "", "local cache for a store folder (default: ~/.cache/drmas/models/<hash of the URL>)")
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("text")
	return cmd
}

// checkUTF8 refuses text that is not UTF-8, naming the first invalid byte.
func checkUTF8(text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("--text: byte 0x%02x at offset %d is not valid UTF-8: the tokenizer reads Unicode text; convert the text to UTF-8 (iconv -t UTF-8)", text[i], i)
		}
		i += size
	}
	return nil
}
