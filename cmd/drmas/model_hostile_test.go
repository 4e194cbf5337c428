package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelHostileFolders: inspect refuses what score refuses (one validation path), a
// directory named model.safetensors is named as one, and tokenize refuses text that is not
// UTF-8; each is one line.
func TestModelHostileFolders(t *testing.T) {
	tmp := t.TempDir()
	good := filepath.Join(tmp, "good")
	if _, _, err := execute(t, initArgs("qwen2", tinyTokenizer, good, "1")...); err != nil {
		t.Fatal(err)
	}
	variant := func(name string, change func(dir string)) string {
		dir := filepath.Join(tmp, name)
		if err := os.CopyFS(dir, os.DirFS(good)); err != nil {
			t.Fatal(err)
		}
		change(dir)
		return dir
	}
	rope := variant("rope", func(dir string) {
		var c map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		_ = json.Unmarshal(b, &c)
		c["rope_theta"] = 1e-300
		b, _ = json.Marshal(c)
		_ = os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	})
	metaspace := variant("metaspace", func(dir string) {
		var c map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
		_ = json.Unmarshal(b, &c)
		c["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		b, _ = json.Marshal(c)
		_ = os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644)
	})
	dirST := variant("dirst", func(dir string) {
		p := filepath.Join(dir, "model.safetensors")
		_ = os.Remove(p)
		_ = os.Mkdir(p, 0o755)
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "inspect", "--model", rope}, "rope_theta 1e-300"},
		{[]string{"model", "score", "--model", rope, "--prompt-ids", "1", "--response-ids", "2"}, "rope_theta 1e-300"},
		{[]string{"model", "inspect", "--model", metaspace}, "Metaspace"},
		{[]string{"model", "tokenize", "--model", metaspace, "--text", "hi"}, "Metaspace"},
		{[]string{"model", "inspect", "--model", dirST}, "model.safetensors: a directory, not a regular file"},
		{[]string{"model", "tokenize", "--model", good, "--text", "a\xffb"}, "--text: byte 0xff at offset 1 is not valid UTF-8"},
	} {
		_, _, err := execute(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line with %q", c.args[:2], err, c.want)
		}
	}
	if _, _, err := execute(t, "model", "inspect", "--model", good); err != nil {
		t.Fatalf("the good folder: %v", err)
	}
}
