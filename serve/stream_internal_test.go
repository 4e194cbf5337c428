package serve

import (
	"encoding/json"
	"testing"

	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/model"
)

// asClient is s as a client reads it from a JSON chunk (each invalid byte as U+FFFD).
func asClient(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// TestDeltaWaitsForCutCharacters: the byte-level policy's text streamed a token (a byte) at a
// time — two- to four-byte characters cut between tokens, and an invalid byte — reads as the
// whole text does, and no chunk carries half a character.
func TestDeltaWaitsForCutCharacters(t *testing.T) {
	whole := "héllo, 世界 \xff🎉 ok é"
	ids := model.Encode(whole)
	st := &streamState{s: &Server{codec: builtinCodec{}}, req: &openai.CompletionRequest{}, all: make([][]int32, 1)}
	got, chunks := "", 0
	for k, id := range ids {
		st.all[0] = append(st.all[0], id)
		d := st.delta(0, k == len(ids)-1)
		if asClient(d) != d && d != "\xff" && d != "\xff\xf0\x9f\x8e\x89" {
			t.Errorf("token %d: a chunk with a cut character: %q", k, d)
		}
		if d != "" {
			chunks++
		}
		got += asClient(d)
	}
	if got != asClient(whole) || chunks < 10 {
		t.Fatalf("streamed %q in %d chunks, want %q", got, chunks, asClient(whole))
	}
}
