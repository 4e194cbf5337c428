package configs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestOpenAIBackendSettings(t *testing.T) {
	c, err := Load(LoadOptions{File: "vllm-hetero.yaml", LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := Load(LoadOptions{File: "vllm-shared.yaml", LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if w := shared.Models["m1"].OpenAI.VersionWait; w != 2*time.Minute {
		t.Fatalf("vllm-shared.yaml version_wait decoded as %s", w)
	}
	big, small := c.Models["big"], c.Models["small"]
	if !big.IsOpenAI() || big.External() || !big.OpenAI.Batch || big.OpenAI.Endpoint != "http://127.0.0.1:8000" || small.OpenAI.Timeout != 60*time.Second {
		t.Fatalf("decoded %+v %+v", big, small)
	}
	// Local configs digest as before: the new fields are omitted when unset.
	if got := string(mustJSON(Default().Models)); got != `{"m1":{"dim":64,"layers":3,"heads":4,"context":128,"ff_mult":4,"tied_head":true}}` {
		t.Fatalf("default models encode new fields: %s", got)
	}

	p := write(t, "bad.yaml", `run: x
models:
  ext: {backend: openai, openai: {endpoint: "localhost:8000", mode: stream, api_key_env: sk-abc, retries: -2, version_wait: -1s}}
  loc: {dim: 8, layers: 1, heads: 2, context: 16, ff_mult: 2, openai: {endpoint: "http://x"}}
  odd: {dim: 8, layers: 1, heads: 2, context: 16, ff_mult: 2, backend: triton}
agents:
  solver: {model: ext}
`)
	_, err = Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`models.ext.openai.endpoint "localhost:8000" must start with http://`,
		`models.ext.openai.mode: "stream" is not completions or chat`,
		"models.ext.openai.api_key_env must be the NAME of an environment variable",
		"models.ext.openai.retries: -2, want ≥ -1",
		"models.ext.openai.version_wait: -1s, want ≥ 0",
		`models.loc.openai is set but backend is ""`,
		`models.odd.backend: "triton" is not local or openai`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "models.ext: dim") {
		t.Errorf("an external model needs no sizes: %v", err)
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
