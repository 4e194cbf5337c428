package importer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// Text that is not UTF-8 is refused with the line or row, and nothing is written: JSON decoding
// would turn each bad byte into U+FFFD (merging the uids "a\xff" and "a\xfe" into one group),
// and a Parquet string would reach shards that DuckDB cannot read.
func TestImportRefusesInvalidUTF8(t *testing.T) {
	type row struct {
		UID     string  `parquet:"uid"`
		TrajUID string  `parquet:"traj_uid"`
		Agent   string  `parquet:"agent"`
		Step    int32   `parquet:"step"`
		Score   float64 `parquet:"score"`
	}
	for name, path := range map[string]string{
		"jsonl": writeFile(t, "bad.jsonl", "{\"uid\":\"a\xff\",\"traj_uid\":\"t1\",\"agent\":\"s\",\"step\":0,\"score\":1}\n"+
			"{\"uid\":\"a\xfe\",\"traj_uid\":\"t2\",\"agent\":\"s\",\"step\":0,\"score\":0}\n"),
		"parquet": writeParquet(t, "bad.parquet", []row{{"a\xff", "t1", "s", 0, 1}, {"a\xfe", "t2", "s", 0, 0}}),
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			_, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0})
			var ve *importer.ValidationError
			if !errors.As(err, &ve) || ve.Total != 2 || !strings.Contains(err.Error(), "not valid UTF-8") {
				t.Fatalf("got %v, want 2 problems naming invalid UTF-8", err)
			}
			if ks := keys(t, env.Bucket); len(ks) != 0 {
				t.Fatalf("wrote %q", ks)
			}
		})
	}
}

// Free text (prompt_text, response_text) is stored as rollout stores a policy's output: invalid
// sequences become U+FFFD.
func TestImportRepairsInvalidUTF8InText(t *testing.T) {
	type row struct {
		UID      string  `parquet:"uid"`
		TrajUID  string  `parquet:"traj_uid"`
		Agent    string  `parquet:"agent"`
		Step     int32   `parquet:"step"`
		Score    float64 `parquet:"score"`
		Response string  `parquet:"response_text"`
	}
	env := newEnv(t)
	path := writeParquet(t, "text.parquet", []row{{"u", "t", "s", 0, 1, "caf\xc3"}})
	if _, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0}); err != nil {
		t.Fatal(err)
	}
	_, parts := stagetest.ReadRollout(t, env, 0)
	if got := parts[0][0].ResponseText; got != "caf\uFFFD" {
		t.Fatalf("response_text %q", got)
	}
}

// TestImportRefusesLoneSurrogateIDs: JSON escapes of lone UTF-16 surrogates decode to U+FFFD,
// so the uids "a\ud800" and "a\udfff" of a JSONL file became one group. Ids and names holding
// U+FFFD are refused; free text keeps it.
func TestImportRefusesLoneSurrogateIDs(t *testing.T) {
	path := writeFile(t, "sur.jsonl", `{"uid":"a\ud800","traj_uid":"t1","agent":"s","step":0,"score":1,"response_text":"x\udcff"}`+"\n"+
		`{"uid":"a\udfff","traj_uid":"t2","agent":"s","step":0,"score":0}`+"\n"+
		`{"uid":"b","traj_uid":"t3","agent":"s","step":0,"score":0,"task_id":"\ud83d"}`+"\n")
	env := newEnv(t)
	_, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0})
	var ve *importer.ValidationError
	if !errors.As(err, &ve) || ve.Total != 3 || !strings.Contains(err.Error(), "U+FFFD") {
		t.Fatalf("got %v, want 3 problems naming U+FFFD", err)
	}
	if ks := keys(t, env.Bucket); len(ks) != 0 {
		t.Fatalf("wrote %q", ks)
	}
	ok := writeFile(t, "ok.jsonl", `{"uid":"a","traj_uid":"t1","agent":"s","step":0,"score":1,"response_text":"x\udcff"}`+"\n")
	if _, err := importer.Run(context.Background(), env, importer.Options{Path: ok, Iteration: 0}); err != nil {
		t.Fatalf("a lone surrogate in free text: %v", err)
	}
}
