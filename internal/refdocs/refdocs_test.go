package refdocs

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestMeaningsNameKeys fails when a hand-written meaning names a key the config does not have
// (a renamed or removed key).
func TestMeaningsNameKeys(t *testing.T) {
	docs, err := FieldDocs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range Keys(docs) {
		have[k.Path] = true
	}
	for path := range meanings {
		if !have[path] {
			t.Errorf("meanings has %q, which is not a config key", path)
		}
	}
	for _, want := range []string{"learn.lr", "models.<id>.lora.r", "agents.<agent>.model", "s3.endpoint"} {
		if !have[want] {
			t.Errorf("Keys misses %q", want)
		}
	}
}

// TestFieldDocs reads a documented field's comment from the source.
func TestFieldDocs(t *testing.T) {
	docs, err := FieldDocs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if d := docs[Module+"/configs.LoRA.R"]; !strings.HasPrefix(d, "R is the rank") {
		t.Errorf("doc of configs.LoRA.R = %q", d)
	}
}

func TestYAMLComments(t *testing.T) {
	src := "# header\na: 1   # one\nb:\n  c: x  # first\n        # second\n  d: 2\n# loose\ne: 3\n"
	got := yamlComments([]byte(src))
	want := map[string]string{"a": "one", "b.c": "first second"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"drmas run-stage rollout":           "drmas-run-stage-rollout",
		"Stores: S3 and MinIO (`s3://…`)":   "stores-s3-and-minio-s3",
		"The paper's condition (Lemma 4.2)": "the-papers-condition-lemma-42",
		"avg@k, pass_at_k":                  "avgk-pass_at_k",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCLIListsVisibleCommands: hidden commands and cobra's own are left out; each command's
// help appears under its heading.
func TestCLIListsVisibleCommands(t *testing.T) {
	root := &cobra.Command{Use: "x", Short: "root"}
	sub := &cobra.Command{Use: "sub", Short: "a sub", Run: func(*cobra.Command, []string) {}}
	sub.Flags().Int("n", 3, "how many")
	root.AddCommand(sub, &cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}})
	root.InitDefaultHelpCmd()
	out, err := CLI(root)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"## x sub\n", "--n int   how many (default 3)", "[`x sub`](#x-sub) — a sub"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	for _, not := range []string{"## x secret", "## x help"} {
		if strings.Contains(s, not) {
			t.Errorf("%q should be left out", not)
		}
	}
}
