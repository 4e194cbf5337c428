package importer_test

import (
	"context"
	"testing"

	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// JSONL free text with invalid UTF-8 is repaired as Parquet's is (and as the commit says), not
// refused: only ids and names must be valid.
func TestImportRepairsInvalidUTF8InJSONLText(t *testing.T) {
	env := newEnv(t)
	path := writeFile(t, "text.jsonl", "{\"uid\":\"u\",\"traj_uid\":\"t\",\"agent\":\"s\",\"step\":0,\"score\":1,\"response_text\":\"caf\xc3\"}\n")
	if _, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0}); err != nil {
		t.Fatal(err)
	}
	_, parts := stagetest.ReadRollout(t, env, 0)
	if got := parts[0][0].ResponseText; got != "caf\uFFFD" {
		t.Fatalf("response_text %q", got)
	}
}
