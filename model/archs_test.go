package model

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchRegistry: every entry is named, has a class and an InitConfig, runs the block the
// engines implement for the Llama family, and WithDefaults gives a config Validate accepts with
// the entry's biases and q/k norms; a second entry of one name panics.
func TestArchRegistry(t *testing.T) {
	names := ArchNames()
	for _, want := range []string{"llama", "mistral", "qwen2", "qwen3"} {
		if !slices.Contains(names, want) {
			t.Fatalf("registry %v lacks %s", names, want)
		}
	}
	for _, n := range names {
		a, ok := LookupArch(n)
		if !ok || a.Name != n || !strings.HasSuffix(a.Class, "ForCausalLM") || a.InitConfig == nil || a.Block != LlamaBlock {
			t.Errorf("%s: %+v", n, a)
		}
		for _, bias := range []bool{false, true} {
			c := ArchConfig{Arch: n, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 24, Vocab: 32, QKVBias: bias}.WithDefaults()
			qkv, o := a.Biases(bias)
			if err := c.Validate(); err != nil || c.QKVBias != qkv || c.OBias != o || c.QKNorm != a.QKNorm {
				t.Errorf("%s bias %v: %+v %v", n, bias, c, err)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("a second %s entry did not panic", names[0])
		}
	}()
	registerArch(Arch{Name: names[0]})
}

// TestNoArchNamesOutsideRegistry: no non-test Go file outside the registry's files spells a
// registered model_type as a string literal (the shape constants of model/cmd's benchmarks and
// the stagetest helper excepted), so every rule about an architecture lives in its entry.
// archRule matches code that decides by the architecture's name: a comparison with it, a switch
// case or a map key. Naming it as a value (a shape's Arch field, a file format's tag) is not a rule.
func archRule(name string) *regexp.Regexp {
	q := regexp.QuoteMeta(`"` + name + `"`)
	return regexp.MustCompile(`(==|!=)\s*` + q + `|` + q + `\s*(==|!=)|case\s+(("[^"]*"\s*,\s*)*)` + q + `|` + q + `\s*:\s*[^/\s]`)
}

func TestArchRule(t *testing.T) {
	for src, want := range map[string]bool{
		`if c.Arch == "qwen2" {`:               true,
		`if "qwen2" != a {`:                    true,
		`case "qwen3", "qwen2":`:               true,
		`m := map[string]int{"qwen2": 1}`:      true,
		`c := ArchConfig{Arch: "qwen2", H: 1}`: false,
		`v := Vocab{Pre: "qwen2", Tokens: t}`:  false,
	} {
		if got := archRule("qwen2").MatchString(src); got != want {
			t.Errorf("%s: matched %v, want %v", src, got, want)
		}
	}
}

func TestNoArchNamesOutsideRegistry(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == filepath.Join("model", "cmd") || rel == filepath.Join("stages", "stagetest") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(rel, "model"+string(filepath.Separator)+"arch_") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range ArchNames() {
			if archRule(n).Match(src) {
				t.Errorf("%s compares model_type with %q: put the rule in the registry entry", rel, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
