package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/model"
)

// scoreJob is one prompt and response to score.
type scoreJob struct {
	Prompt   []int32 `json:"prompt"`
	Response []int32 `json:"response"`
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// runScore runs `drmas model score` and parses its lines.
func runScore(t *testing.T, modelArg string, j scoreJob, extra ...string) []float64 {
	t.Helper()
	args := append([]string{"model", "score", "--model", modelArg, "--prompt-ids", joinIDs(j.Prompt), "--response-ids", joinIDs(j.Response)}, extra...)
	out, _, err := execute(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(j.Response) {
		t.Fatalf("%d lines for %d response tokens:\n%s", len(lines), len(j.Response), out)
	}
	lp := make([]float64, len(lines))
	for i, l := range lines {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil || strings.ContainsAny(l, "eE") || v > 0 {
			t.Fatalf("line %d %q is not a decimal log-probability", i+1, l)
		}
		lp[i] = v
	}
	return lp
}

// torchScores runs testdata/score_ref.py, PyTorch reading each folder itself, and returns per
// folder the log-probabilities of each job.
func torchScores(t *testing.T, py string, dirs []string, jobs []scoreJob) [][][]float64 {
	t.Helper()
	type folderJobs struct {
		Model string     `json:"model"`
		Seqs  []scoreJob `json:"seqs"`
	}
	var all []folderJobs
	for _, d := range dirs {
		all = append(all, folderJobs{d, jobs})
	}
	jobsPath := filepath.Join(t.TempDir(), "jobs.json")
	js, _ := json.Marshal(all)
	if err := os.WriteFile(jobsPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "score_ref.py"), jobsPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("score_ref.py: %v", err)
	}
	var ref [][][]float64
	if err := json.Unmarshal(out, &ref); err != nil || len(ref) != len(dirs) {
		t.Fatalf("score_ref.py output: %v\n%s", err, out)
	}
	return ref
}

// sharpFolder writes an untied qwen2 folder with weights large enough (std 0.3, non-zero biases
// and norms) that the next-token distributions are far from uniform, so a token or position off
// by one changes the log-probabilities by much more than the tolerance.
func sharpFolder(t *testing.T, dtype string) string {
	t.Helper()
	cfg, err := hf.NewConfig(hf.InitSpec{Arch: "qwen2", Hidden: 48, Layers: 2, Heads: 6, KVHeads: 2, Intermediate: 64, Vocab: 320, Untied: true})
	if err != nil {
		t.Fatal(err)
	}
	rnd := hf.RandomTensors(cfg, 11)
	dir := filepath.Join(t.TempDir(), "sharp-"+dtype)
	get := func(name string) []float32 {
		v := rnd(name)
		for i := range v {
			switch {
			case strings.HasSuffix(name, ".bias"):
				v[i] = float32(math.Sin(float64(i))) * 0.5
			case strings.HasSuffix(name, "norm.weight"):
				v[i] = 1 + float32(math.Cos(float64(i)))*0.3
			default:
				v[i] *= 15
			}
		}
		return v
	}
	if err := hf.WriteFolder(dir, cfg, dtype, get, tinyTokenizer); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scoreJobs are sequences within vocab of the tiny tokenizer's model: a short one and one
// reaching position 149, with seeded random ids.
func scoreJobs(vocab int) []scoreJob {
	r := rand.New(rand.NewPCG(3, 4))
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(vocab))
		}
		return out
	}
	return []scoreJob{{Prompt: ids(3), Response: ids(4)}, {Prompt: ids(110), Response: ids(40)}, {Prompt: ids(1), Response: ids(1)}}
}

// TestModelScore: `drmas model score` prints, for folders made by `model init` (qwen3, BF16) and
// by hf.WriteFolder (qwen2 untied with biases, BF16 and F32), exactly the engine's Score of the
// loaded model, and the log-probabilities PyTorch computes in float64 from the same folder
// read by Python, within 5e-5; a store folder (file://) gives the same lines.
func TestModelScore(t *testing.T) {
	tmp := t.TempDir()
	initDir := filepath.Join(tmp, "init")
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, initDir, "5", "--head-dim", "32")...); err != nil {
		t.Fatal(err)
	}
	folders := []string{initDir, sharpFolder(t, "bf16"), sharpFolder(t, "f32")}
	var got [][][]float64
	for _, dir := range folders {
		m, cfg, err := hf.LoadLLM(dir)
		if err != nil {
			t.Fatal(err)
		}
		jobs := scoreJobs(cfg.Vocab)
		var perDir [][]float64
		for _, j := range jobs {
			lp := runScore(t, dir, j)
			want, _, err := m.Score([]model.Sequence{{Prompt: j.Prompt, Response: j.Response}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range want[0] {
				if float32(lp[i]) != v {
					t.Errorf("%s: token %d: printed %v, the engine's Score %v", filepath.Base(dir), i, lp[i], v)
				}
			}
			perDir = append(perDir, lp)
		}
		got = append(got, perDir)
	}
	if store := runScore(t, "file://"+filepath.ToSlash(initDir), scoreJobs(320)[0], "--cache", filepath.Join(tmp, "cache")); !slices.Equal(store, got[0][0]) {
		t.Errorf("from the store %v, from the folder %v", store, got[0][0])
	}

	py := oracles.Torch(t)
	refs := torchScores(t, py, folders, scoreJobs(320))
	for k, dir := range folders {
		ref := refs[k]
		var worst, spread float64
		for ji, lp := range got[k] {
			for i, v := range lp {
				worst = max(worst, math.Abs(v-ref[ji][i]))
				spread = max(spread, math.Abs(v-got[k][ji][0]))
			}
		}
		if worst > 5e-5 {
			t.Errorf("%s: log-probabilities differ from PyTorch's by %.3g", filepath.Base(dir), worst)
		}
		t.Logf("%s: worst |Δ log p| vs PyTorch %.3g (log-probs spread over %.3g)", filepath.Base(dir), worst, spread)
		if k > 0 && spread < 1 {
			t.Errorf("%s: log-probabilities within %.3g of each other: the distribution is too flat for the test to see an off-by-one", dir, spread)
		}
	}
}

// TestModelScoreErrors: bad ids and lists are one line naming the flag.
func TestModelScoreErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, _, err := execute(t, initArgs("qwen2", tinyTokenizer, dir, "1", "--max-positions", "16")...); err != nil {
		t.Fatal(err)
	}
	score := func(p, r string) []string {
		return []string{"model", "score", "--model", dir, "--prompt-ids", p, "--response-ids", r}
	}
	long := strings.TrimSuffix(strings.Repeat("1,", 10), ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{score("1,2", ""), "--response-ids is empty"},
		{score(" ", "3"), "--prompt-ids is empty"},
		{score("1,,2", "3"), `--prompt-ids: item 2 "" is not a token id`},
		{score("1,2", "3,-4"), `--response-ids: item 2 "-4" is not a token id`},
		{score("1,2", "3;4"), `item 1 "3;4" is not a token id`},
		{score("1,99999999999", "3"), `item 2 "99999999999" is not a token id`},
		{score("1,2", "320"), "--response-ids: token 320 is out of the vocabulary: " + dir + " has vocab_size 320 (ids 0 to 319)"},
		{score("5000", "1"), "--prompt-ids: token 5000 is out of the vocabulary"},
		{score(long, long), "20 prompt and response tokens are more than the model's context of 16"},
		{[]string{"model", "score", "--model", dir, "--prompt-ids", "1"}, `required flag(s) "response-ids" not set`},
		{score("1", "2")[:4], `required flag(s) "prompt-ids", "response-ids" not set`},
		{[]string{"model", "score", "--model", filepath.Join(dir, "none"), "--prompt-ids", "1", "--response-ids", "2"}, "no such file"},
		{initArgs("qwen3", tinyTokenizer, filepath.Join(dir, "odd"), "1", "--head-dim", "3"), "the engine cannot run this model: arch config: head_dim 3 must be even"},
	} {
		_, _, err := execute(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// TestModelTokenize: `drmas model tokenize` on the real Qwen3 tokenizer gives the ids of HF's JS
// tokenizer (add_special_tokens false) for strings with special-token text, whitespace runs,
// digits, code and emoji; on the tiny tokenizer of a store folder it gives ids worked by hand.
func TestModelTokenize(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, _, err := execute(t, initArgs("qwen3", tinyTokenizer, dir, "1", "--head-dim", "32")...); err != nil {
		t.Fatal(err)
	}
	// The tiny tokenizer's ids are its bytes' plus merges; "<|im_end|>" is added token 266
	// (hf/testdata/tinytok/tokenizer.json), "H" is byte 72 and "i" 105.
	for _, m := range []string{dir, "file://" + filepath.ToSlash(dir)} {
		out, _, err := execute(t, "model", "tokenize", "--model", m, "--text", "Hi<|im_end|>", "--cache", filepath.Join(t.TempDir(), "c"))
		if err != nil || out != "[72,105,266]\n" {
			t.Errorf("%s: %q %v", m, out, err)
		}
	}
	if out, _, err := execute(t, "model", "tokenize", "--model", dir, "--text", ""); err != nil || out != "[]\n" {
		t.Errorf("empty text: %q %v", out, err)
	}
	if _, _, err := execute(t, "model", "tokenize", "--model", t.TempDir(), "--text", "x"); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("no tokenizer: %v", err)
	}

	tokDir := oracles.Qwen3TokenizerDir(t)
	nm := oracles.NodeModules(t)
	// Each call loads the 11 MB tokenizer.json: a handful of strings covering special-token text,
	// whitespace runs, digits, code and emoji (package tokenizer compares 10,000 against HF).
	texts := []string{
		"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
		"  leading and trailing  \t\n\n12345678 + 0.5", "func main() {\n\tfmt.Println(\"héllo\")\n}",
		"👩‍👩‍👧 🇫🇷 日本語のテキスト", "<|endoftext|><|im_end|>x<think>\n\n</think>",
	}
	var want []struct {
		IDs []int32 `json:"ids"`
	}
	tmp := t.TempDir()
	in, out := filepath.Join(tmp, "in.json"), filepath.Join(tmp, "out.json")
	js, _ := json.Marshal(texts)
	if err := os.WriteFile(in, js, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "tokenizer", "testdata", "oracle.mjs"))
	if msg, err := exec.Command("node", script, nm, tokDir, "encode", in, out).CombinedOutput(); err != nil {
		t.Fatalf("node oracle: %v\n%s", err, msg)
	}
	raw, _ := os.ReadFile(out)
	if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(texts) {
		t.Fatalf("oracle output %v: %s", err, raw)
	}
	for i, s := range texts {
		got, _, err := execute(t, "model", "tokenize", "--model", tokDir, "--text", s)
		if err != nil {
			t.Fatal(err)
		}
		wantJS, _ := json.Marshal(want[i].IDs)
		if got != string(wantJS)+"\n" {
			t.Errorf("%q: drmas %s, HF %s", s, strings.TrimSpace(got), wantJS)
		}
	}
	if !slices.Contains(want[0].IDs, 151645) {
		t.Errorf("HF's ids of %q lack <|im_end|>'s 151645: %v", texts[0], want[0].IDs)
	}
}

// TestModelScoreAdapter: with --adapter, score gives exactly what it gives on a folder holding
// the merged weights (written in F32 by hf.WriteLLM, so nothing is rounded), and not what the
// base model gives.
func TestModelScoreAdapter(t *testing.T) {
	base := sharpFolder(t, "f32")
	r := rand.New(rand.NewPCG(8, 9))
	var tensors []model.Tensor
	for _, mod := range []struct {
		name    string
		out, in int
	}{{"model.layers.0.self_attn.q_proj", 48, 48}, {"model.layers.1.self_attn.v_proj", 16, 48}, {"model.layers.1.mlp.down_proj", 48, 64}} {
		a, b := make([]float32, 4*mod.in), make([]float32, mod.out*4)
		for i := range a {
			a[i] = float32(r.NormFloat64() * 0.3)
		}
		for i := range b {
			b[i] = float32(r.NormFloat64() * 0.3)
		}
		tensors = append(tensors, model.F32Tensor("base_model.model."+mod.name+".lora_A.weight", []int{4, mod.in}, a),
			model.F32Tensor("base_model.model."+mod.name+".lora_B.weight", []int{mod.out, 4}, b))
	}
	adapter := t.TempDir()
	f, err := os.Create(filepath.Join(adapter, hf.AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteSafetensors(f, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := `{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"], "bias": "none"}`
	if err := os.WriteFile(filepath.Join(adapter, hf.AdapterConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	m, mcfg, err := hf.LoadLLM(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.ApplyAdapter(m, adapter); err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if err := hf.WriteLLM(merged, mcfg, m, "", tinyTokenizer); err != nil {
		t.Fatal(err)
	}
	j := scoreJobs(320)[1]
	withAdapter := runScore(t, base, j, "--adapter", adapter)
	if want := runScore(t, merged, j); !slices.Equal(withAdapter, want) {
		t.Errorf("--adapter %v, merged folder %v", withAdapter, want)
	}
	if plain := runScore(t, base, j); slices.Equal(withAdapter, plain) {
		t.Error("the adapter changed nothing")
	}
	_, _, err = execute(t, "model", "score", "--model", base, "--adapter", t.TempDir(), "--prompt-ids", "1", "--response-ids", "2")
	if err == nil || !strings.Contains(err.Error(), "--adapter: read adapter config") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no adapter files: %v", err)
	}
}
