package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// tinySpec is tinyQwen3's shape (so writeAdapter's adapters fit it); a block of its keys and
// values (1 layer, 1 KV head of 8 floats) is 2 × 16 × 8 float32s.
var tinySpec = hf.InitSpec{Arch: "qwen3", Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 32, HeadDim: 8, MaxPositions: 256}

const tinyBlockBytes = 2 * 16 * 8 * 4

// tinytokModel writes a random folder of shape s (its vocabulary the test tokenizer's), its
// weights drawn from seed.
func tinytokModel(t testing.TB, s hf.InitSpec, seed uint64) string {
	t.Helper()
	tok := filepath.Join("..", "hf", "testdata", "tinytok")
	info, err := hf.ReadTokenizerInfo(tok)
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = hf.VocabFor(info)
	cfg, err := hf.NewConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := hf.WriteFolder(dir, cfg, hf.F32, hf.RandomTensors(cfg, seed), tok); err != nil {
		t.Fatal(err)
	}
	return dir
}

// turn is one completion as a client sees it: the tokens, their log-probs, and the prompt
// tokens the server took from its prefix cache.
type turn struct {
	toks   []int32
	lps    []float32
	cached int
}

// ask posts a completion of prompt (token ids) to model, seeded, with token-id log-probs.
func ask(t testing.TB, url, model string, prompt []int32, seed, maxTokens int) turn {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "seed": seed, "max_tokens": maxTokens,
		"temperature": 1, "logprobs": 1, "return_tokens_as_token_ids": true})
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return turn{}
	}
	defer resp.Body.Close()
	var out openai.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 || out.Usage == nil || out.Usage.PromptTokensDetails == nil {
		t.Errorf("POST %s/v1/completions: %d %v %+v", url, resp.StatusCode, err, out)
		return turn{}
	}
	var tr turn
	lp := out.Choices[0].Logprobs
	for i, s := range lp.Tokens {
		id, ok := openai.ParseTokenID(s)
		if !ok {
			t.Errorf("token %q is not a token id", s)
		}
		tr.toks = append(tr.toks, id)
		tr.lps = append(tr.lps, lp.TokenLogprobs[i].V)
	}
	tr.cached = out.Usage.PromptTokensDetails.CachedTokens
	return tr
}

// sameTurn fails unless two completions drew the same tokens and log-probs.
func sameTurn(t *testing.T, what string, got, want turn) {
	t.Helper()
	if !slices.Equal(got.toks, want.toks) || !slices.Equal(got.lps, want.lps) {
		t.Errorf("%s: %v %v, want %v %v", what, got.toks, got.lps, want.toks, want.lps)
	}
}

// opening is a prompt of n ordinary tokens of the test tokenizer, drawn from seed i.
func opening(i, n int) []int32 {
	r := rand.New(rand.NewPCG(uint64(i), 2))
	ids := make([]int32, n)
	for j := range ids {
		ids[j] = int32(3 + r.IntN(250))
	}
	return ids
}

// wholeBlocks is the prompt positions a server's prefix cache must give a prompt of n tokens
// after a conversation whose fed tokens (prompt and answer but its last token) number fed:
// their whole 16-token blocks, leaving at least one prompt token to feed.
func wholeBlocks(fed, n int) int { return 16 * min(fed/16, (n-1)/16) }

// TestPrefixCacheChatTurns: three two-turn conversations through a server with the prefix
// cache, each second turn sent while the others decode: every later turn's prompt (the first
// turn's prompt, its answer, a new message) takes the whole blocks of the first turn's prompt
// and answer from the cache, usage.prompt_tokens_details.cached_tokens says how many, and every
// turn draws the tokens and log-probs a server without the cache draws for the same seed.
func TestPrefixCacheChatTurns(t *testing.T) {
	dir := tinytokModel(t, tinySpec, 7)
	on, onURL := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	_, offURL := start(t, serve.Options{HF: dir, Poll: -1, Name: "m", PrefixCacheBytes: -1})
	const chats, answer = 3, 24
	first := make([]turn, chats)
	prompts := make([][]int32, chats)
	for i := range chats {
		prompts[i] = opening(i, 37+i)
		first[i] = ask(t, onURL, "m", prompts[i], 10+i, answer)
		sameTurn(t, fmt.Sprintf("chat %d, turn 1", i), first[i], ask(t, offURL, "m", prompts[i], 10+i, answer))
		if first[i].cached != 0 || len(first[i].toks) != answer {
			t.Fatalf("chat %d, turn 1: %d cached tokens and %d sampled, want 0 and %d (a seed whose answer does not stop early)", i, first[i].cached, len(first[i].toks), answer)
		}
	}
	second := make([]turn, chats)
	later := make([][]int32, chats)
	var wg sync.WaitGroup
	for i := range chats {
		later[i] = slices.Concat(prompts[i], first[i].toks, opening(50+i, 9))
		wg.Add(1)
		go func() { defer wg.Done(); second[i] = ask(t, onURL, "m", later[i], 20+i, 8) }()
	}
	wg.Wait()
	total := 0
	for i := range chats {
		want := wholeBlocks(len(prompts[i])+answer-1, len(later[i]))
		if second[i].cached != want || want <= len(prompts[i]) {
			t.Errorf("chat %d, turn 2: %d prompt tokens from the cache, want %d (whole blocks of the first prompt and answer, %d+%d tokens)", i, second[i].cached, want, len(prompts[i]), answer)
		}
		sameTurn(t, fmt.Sprintf("chat %d, turn 2", i), second[i], ask(t, offURL, "m", later[i], 20+i, 8))
		total += second[i].cached
	}
	if got := on.Stats().CachedTokens; got != int64(total) {
		t.Errorf("Stats().CachedTokens %d, want %d", got, total)
	}
}

// TestPrefixCacheDroppedOnReload: after /update_weights_from_disk the conversation's blocks,
// computed by the old weights, are not found: the next turn prefills all its prompt and draws
// what a fresh server of the new weights draws; the turn after it finds the new weights'.
func TestPrefixCacheDroppedOnReload(t *testing.T) {
	dir := tinytokModel(t, tinySpec, 7)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	step := tinytokModel(t, tinySpec, 9)
	_, fresh := start(t, serve.Options{HF: step, Poll: -1, Name: "m"})
	p := opening(0, 40)
	next := slices.Concat(p, opening(1, 20))
	ask(t, url, "m", p, 1, 4)
	old := ask(t, url, "m", next, 2, 4)
	if old.cached != 32 {
		t.Fatalf("before the reload the later turn took %d tokens from the cache, want 32", old.cached)
	}
	if status, r := post(t, url+"/update_weights_from_disk", map[string]any{"model_path": step}); status != 200 || r["success"] != true {
		t.Fatalf("reload: %d %v", status, r)
	}
	got := ask(t, url, "m", next, 2, 4)
	if got.cached != 0 {
		t.Errorf("after the reload the later turn took %d tokens from the cache (keys and values of the old weights), want 0", got.cached)
	}
	want := ask(t, fresh, "m", next, 2, 4)
	sameTurn(t, "after the reload", got, want)
	if slices.Equal(old.lps, want.lps) {
		t.Fatal("the two folders sample alike: the test cannot tell which weights sampled")
	}
	if again := ask(t, url, "m", next, 2, 4); again.cached != 48 {
		t.Errorf("the new weights' cache gave %d tokens, want 48", again.cached)
	} else {
		sameTurn(t, "over the new weights' cache", again, want)
	}
}

// TestPrefixCacheDroppedOnNewCheckpoint: a server of a run's checkpoints drops its cache when
// it swaps in the checkpoint LATEST names.
func TestPrefixCacheDroppedOnNewCheckpoint(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	srv, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1})
	p := make([]int32, 40)
	for i := range p {
		p[i] = int32('a' + i%26)
	}
	ask(t, url, "", p, 1, 2)
	if got := ask(t, url, "", p, 2, 2).cached; got != 32 {
		t.Fatalf("a repeated prompt took %d tokens from the cache, want 32", got)
	}
	publish(t, env, 1)
	if ok, err := srv.Reload(context.Background()); !ok || err != nil {
		t.Fatalf("Reload: %v %v", ok, err)
	}
	if got := ask(t, url, "", p, 2, 2).cached; got != 0 {
		t.Errorf("after checkpoint step 1 was swapped in, %d tokens came from the cache, want 0", got)
	}
}

// TestPrefixCachePerAdapter: an adapter's requests never find the base's blocks, nor the base's
// an adapter's, nor an adapter loaded again under the same name its predecessor's; each
// draws what a server without the cache draws.
func TestPrefixCachePerAdapter(t *testing.T) {
	dir := tinytokModel(t, tinySpec, 7)
	_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m"})
	_, off := start(t, serve.Options{HF: dir, Poll: -1, Name: "m", PrefixCacheBytes: -1})
	a, b := writeAdapter(t, 1), writeAdapter(t, 2)
	load := func(url, name, path string) {
		t.Helper()
		if status, body := postRaw(t, url+"/v1/load_lora_adapter", map[string]any{"lora_name": name, "lora_path": path}); status != 200 {
			t.Fatalf("load %s: %d %s", name, status, body)
		}
	}
	load(url, "a", a)
	load(off, "a", a)
	load(off, "b", b)
	p := opening(0, 40)
	longer := slices.Concat(p, opening(1, 30))
	ask(t, url, "m", p, 1, 4) // the base's blocks of p
	check := func(what, model, offModel string, prompt []int32, cached int) {
		t.Helper()
		got := ask(t, url, model, prompt, 3, 4)
		if got.cached != cached {
			t.Errorf("%s: %d tokens from the cache, want %d", what, got.cached, cached)
		}
		sameTurn(t, what, got, ask(t, off, offModel, prompt, 3, 4))
	}
	if base, withA, withB := ask(t, off, "m", longer, 3, 4), ask(t, off, "a", longer, 3, 4), ask(t, off, "b", longer, 3, 4); slices.Equal(base.lps, withA.lps) || slices.Equal(withA.lps, withB.lps) {
		t.Fatal("the base and the adapters sample alike: the test cannot tell them apart")
	}
	check("adapter a after the base", "a", "a", longer, 0)
	check("adapter a again", "a", "a", longer, 64)
	check("the base after adapter a", "m", "m", longer, 32)
	if status, body := postRaw(t, url+"/v1/unload_lora_adapter", map[string]any{"lora_name": "a"}); status != 200 {
		t.Fatalf("unload: %d %s", status, body)
	}
	load(url, "a", b)
	check("adapter b loaded as a", "a", "b", longer, 0)
}

// TestPrefixCacheBounded: a cache of two blocks keeps the last prompt's two: a prompt of 33
// tokens is found again after itself, not after another prompt of 33; a cache of four keeps
// both.
func TestPrefixCacheBounded(t *testing.T) {
	dir := tinytokModel(t, tinySpec, 7)
	a, b := opening(0, 33), opening(1, 33)
	for _, c := range []struct{ blocks, want int }{{2, 0}, {4, 32}} {
		_, url := start(t, serve.Options{HF: dir, Poll: -1, Name: "m", PrefixCacheBytes: int64(c.blocks * tinyBlockBytes)})
		ask(t, url, "m", a, 1, 1)
		if got := ask(t, url, "m", a, 2, 1).cached; got != 32 {
			t.Errorf("%d blocks: a repeated prompt took %d tokens from the cache, want 32", c.blocks, got)
		}
		ask(t, url, "m", b, 3, 1)
		if got := ask(t, url, "m", a, 4, 1).cached; got != c.want {
			t.Errorf("%d blocks: the first prompt after another took %d tokens from the cache, want %d", c.blocks, got, c.want)
		}
	}
}

// TestPrefixCacheThroughOpenAIsClient: the official openai npm client plays a two-turn chat
// (the second prompt the first, its answer and a new message, as token ids) and reads
// usage.prompt_tokens_details.cached_tokens: none for the first turn, the whole blocks of the
// first prompt and answer for the second, whose tokens and log-probs are a cache-off server's.
func TestPrefixCacheThroughOpenAIsClient(t *testing.T) {
	script := filepath.Join(t.TempDir(), "chat.mjs")
	if err := os.WriteFile(script, []byte(chatScript), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := oracles.NodeProgram(t, script)
	model := tinytokModel(t, tinySpec, 7)
	_, url := start(t, serve.Options{HF: model, Poll: -1, Name: "m"})
	_, off := start(t, serve.Options{HF: model, Poll: -1, Name: "m", PrefixCacheBytes: -1})
	first, more := opening(0, 40), opening(1, 12)
	args, _ := json.Marshal(map[string]any{"url": url + "/v1", "first": first, "more": more})
	cmd := exec.Command("node", "chat.mjs", string(args))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Cached   [2]int
		Answer   []int32
		Tokens   []int32
		Logprobs []float32
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Answer) == 0 {
		t.Fatalf("the client's output: %v\n%s", err, out)
	}
	later := slices.Concat(first, got.Answer, more)
	if want := [2]int{0, wholeBlocks(len(first)+len(got.Answer)-1, len(later))}; got.Cached != want || want[1] != 48 {
		t.Errorf("the client read cached_tokens %v, want %v", got.Cached, want)
	}
	sameTurn(t, "the second turn", turn{toks: got.Tokens, lps: got.Logprobs}, ask(t, off, "m", later, 2, 6))
}

const chatScript = `import OpenAI from "openai";
const a = JSON.parse(process.argv[2]);
const client = new OpenAI({ baseURL: a.url, apiKey: "none" });
const ask = (prompt, seed, max_tokens) => client.completions.create({ model: "m", prompt, max_tokens,
  temperature: 1, seed, logprobs: 1, return_tokens_as_token_ids: true });
const ids = (c) => c.logprobs.tokens.map((s) => Number(s.slice("token_id:".length)));
const r1 = await ask(a.first, 1, 20);
const answer = ids(r1.choices[0]);
const r2 = await ask([...a.first, ...answer, ...a.more], 2, 6);
console.log(JSON.stringify({ Cached: [r1.usage.prompt_tokens_details.cached_tokens, r2.usage.prompt_tokens_details.cached_tokens],
  Answer: answer, Tokens: ids(r2.choices[0]), Logprobs: r2.choices[0].logprobs.token_logprobs }));
`
