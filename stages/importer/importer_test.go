package importer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

const run = "imp"

func newEnv(t *testing.T) *stages.Env {
	t.Helper()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cfg := configs.Default()
	cfg.Run = run
	return &stages.Env{Bucket: b, Config: cfg}
}

func keys(t *testing.T, b storage.Bucket) []string {
	t.Helper()
	var ks []string
	if err := b.Iter(context.Background(), "", func(k string) error { ks = append(ks, k); return nil }); err != nil {
		t.Fatal(err)
	}
	return ks
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeParquet[T any](t *testing.T, name string, rows []T) string {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// advantages returns the advantage of each row of an iteration by (traj_uid, step, agent).
func advantages(t *testing.T, env *stages.Env, iter int, est string, parts [][]shards.Row) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	byID := map[int64]shards.Row{}
	for _, p := range parts {
		for _, r := range p {
			byID[r.RowID] = r
		}
	}
	dir := layout.AdvantageDir(run, iter, est)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range m.Files {
		data, err := commit.ReadFile(ctx, env.Bucket, dir, f)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rows {
			r, ok := byID[a.RowID]
			if !ok {
				t.Fatalf("%s: row_id %d not in the rollout", est, a.RowID)
			}
			out[fmt.Sprintf("%s/%d/%s", r.TrajUID, r.Step, r.Agent)] = float64(a.Advantage)
		}
	}
	return out
}

// The small case of TestJSONLThroughNormalize. Group u1 has three trajectories (rows listed
// out of order on purpose; t2 comes first, so it is sample 0, then t1, then t3):
//
//	t1: a@0 = 1,   b@0 = 1
//	t2: a@0 = 0,   b@0 = 1
//	t3: a@0 = 0,   b@0 = 0.5, a@1 = 0
//
// and group u2 one trajectory t4: a@0 = 0.3 (a singleton group).
const smallJSONL = `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":0}
{"uid":"u1","traj_uid":"t1","agent":"b","step":0,"score":1,"response_ids":[5,6],"response_logprobs":[-0.5,-0.25],"prompt_ids":[1,2,3]}
{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":1,"policy_version":3}

{"uid":"u2","traj_uid":"t4","agent":"a","step":0,"score":0.3,"data_source":"gsm","task_id":7,"valid":false,"finish_reason":"length"}
{"uid":"u1","traj_uid":"t3","agent":"a","step":1,"score":0,"model":"m9","episode_reward":0.5}
{"uid":"u1","traj_uid":"t3","agent":"b","step":0,"score":0.5}
{"uid":"u1","traj_uid":"t3","agent":"a","step":0,"score":0}
{"uid":"u1","traj_uid":"t2","agent":"b","step":0,"score":1,"prompt_text":"p","response_text":"r"}
`

func TestJSONLThroughNormalize(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	path := writeFile(t, "small.jsonl", smallJSONL)
	res, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 4, Parts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || res.Rows != 8 || res.Parts != 2 || res.Groups != 2 || res.Trajectories != 4 ||
		!reflect.DeepEqual(res.Agents, []string{"a", "b"}) || res.PolicyVersion != 3 {
		t.Fatalf("result %+v", res)
	}

	m, parts := stagetest.ReadRollout(t, env, 4)
	sum := sha256.Sum256([]byte(smallJSONL))
	if m.Kind != "rollout" || m.ConfigDigest != hex.EncodeToString(sum[:]) || m.Rows != 8 ||
		!reflect.DeepEqual(m.Params, map[string]string{"source": "small.jsonl", "imported": "true", "policy_version": "3"}) {
		t.Fatalf("manifest %+v", m)
	}
	if len(parts) != 2 || len(parts[0]) != 7 || len(parts[1]) != 1 {
		t.Fatalf("part sizes %d", len(parts))
	}
	// Sorted by (uid, sample, step, agent order a < b); samples in first-seen order.
	var got []string
	for _, r := range parts[0] {
		got = append(got, fmt.Sprintf("%s/%s/s%d/%d/%s", r.UID, r.TrajUID, r.Sample, r.Step, r.Agent))
	}
	want := []string{
		"u1/t2/s0/0/a", "u1/t2/s0/0/b",
		"u1/t1/s1/0/a", "u1/t1/s1/0/b",
		"u1/t3/s2/0/a", "u1/t3/s2/0/b", "u1/t3/s2/1/a",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
	for p, rows := range parts {
		for i, r := range rows {
			if r.RowID != shards.RowID(p, i) || r.Run != run || r.Iteration != 4 {
				t.Fatalf("part %d row %d: row_id %d run %q iteration %d", p, i, r.RowID, r.Run, r.Iteration)
			}
		}
	}
	// Defaults and explicit values.
	t1b := parts[0][3]
	if !reflect.DeepEqual(t1b.ResponseIDs, []int32{5, 6}) || !reflect.DeepEqual(t1b.ResponseLogprobs, []float32{-0.5, -0.25}) ||
		!reflect.DeepEqual(t1b.PromptIDs, []int32{1, 2, 3}) || t1b.TaskID != "u1" || t1b.DataSource != "imported" ||
		t1b.Model != "b" || t1b.EpisodeReward != 1 || !t1b.Valid || t1b.PolicyVersion != 0 {
		t.Fatalf("t1/b row %+v", t1b)
	}
	if r := parts[0][6]; r.Model != "m9" || r.EpisodeReward != 0.5 {
		t.Fatalf("t3/a@1 row %+v", r)
	}
	if r := parts[1][0]; r.UID != "u2" || r.TaskID != "7" || r.DataSource != "gsm" || r.Valid || r.FinishReason != "length" || r.RowID != shards.RowID(1, 0) {
		t.Fatalf("u2 row %+v", r)
	}

	if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: 4, Estimators: []string{"drmas", "grpo"}}); err != nil {
		t.Fatal(err)
	}
	const eps = 1e-6
	// drmas, group u1, agent a: scores {1 (t1), 0 (t2), 0 (t3@0), 0 (t3@1)}:
	//   μ = 0.25, unbiased var = (0.75² + 3·0.25²)/3 = 0.25, σ = 0.5
	//   A(t1) = 0.75/(0.5+ε) ≈ 1.5, A(others) = −0.25/(0.5+ε) ≈ −0.5
	// agent b: scores {1 (t1), 1 (t2), 0.5 (t3)}: μ = 5/6, var = (2·(1/6)² + (1/3)²)/2 = 1/12
	//   A(1) = (1/6)/(√(1/12)+ε) ≈ 0.577, A(0.5) = −(1/3)/(√(1/12)+ε) ≈ −1.155
	sa, sb := 0.5, math.Sqrt(1.0/12)
	wantDrmas := map[string]float64{
		"t1/0/a": 0.75 / (sa + eps), "t2/0/a": -0.25 / (sa + eps), "t3/0/a": -0.25 / (sa + eps), "t3/1/a": -0.25 / (sa + eps),
		"t1/0/b": (1.0 / 6) / (sb + eps), "t2/0/b": (1.0 / 6) / (sb + eps), "t3/0/b": -(1.0 / 3) / (sb + eps),
	}
	// grpo, group u1: trajectory means R̄(t1) = 1, R̄(t2) = 0.5, R̄(t3) = (0+0.5+0)/3 = 1/6;
	//   μ = 5/9, var = ((4/9)² + (1/18)² + (7/18)²)/2 = 57/324, σ ≈ 0.4194
	//   every row of trajectory i gets (R̄ᵢ − μ)/(σ+ε): ≈ 1.060 (t1), −0.132 (t2), −0.927 (t3)
	sg := math.Sqrt(57.0 / 324)
	a1, a2, a3 := (1-5.0/9)/(sg+eps), (0.5-5.0/9)/(sg+eps), (1.0/6-5.0/9)/(sg+eps)
	wantGRPO := map[string]float64{
		"t1/0/a": a1, "t1/0/b": a1, "t2/0/a": a2, "t2/0/b": a2, "t3/0/a": a3, "t3/0/b": a3, "t3/1/a": a3,
	}
	for est, want := range map[string]map[string]float64{"drmas": wantDrmas, "grpo": wantGRPO} {
		got := advantages(t, env, 4, est, parts)
		if len(got) != 8 {
			t.Fatalf("%s: %d advantages, want 8", est, len(got))
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-5 {
				t.Errorf("%s %s: advantage %v, want %v", est, k, g, w)
			}
		}
		// u2 is a singleton group: μ = 0, σ = 1 (docs/design.md, "Estimators"), so A ≈ its score.
		if g := got["t4/0/a"]; math.Abs(g-0.3) > 1e-5 {
			t.Errorf("%s t4: advantage %v, want ≈ 0.3", est, g)
		}
	}
}

type inNoTokens struct {
	UID           string  `parquet:"uid"`
	TrajUID       string  `parquet:"traj_uid"`
	Agent         string  `parquet:"agent"`
	Step          int64   `parquet:"step"` // int64 is accepted for int32 columns
	Score         float64 `parquet:"score"`
	PolicyVersion int32   `parquet:"policy_version"`
	Extra         string  `parquet:"extra"` // ignored
}

type inTokens struct {
	UID              int64     `parquet:"uid"` // integers are accepted for ids
	TrajUID          string    `parquet:"traj_uid,dict"`
	Agent            string    `parquet:"agent,dict"`
	Step             int32     `parquet:"step"`
	Sample           int32     `parquet:"sample"`
	Score            float32   `parquet:"score"`
	EpisodeReward    float64   `parquet:"episode_reward"`
	Valid            bool      `parquet:"valid"`
	DataSource       *string   `parquet:"data_source,optional"`
	PromptIDs        []int32   `parquet:"prompt_ids,list"`
	ResponseIDs      []int64   `parquet:"response_ids"` // a plain repeated column
	ResponseLogprobs []float32 `parquet:"response_logprobs,list"`
	PromptText       string    `parquet:"prompt_text"`
	ResponseText     string    `parquet:"response_text"`
	FinishReason     string    `parquet:"finish_reason"`
}

func TestParquetWithoutTokens(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	in := []inNoTokens{
		{"g2", "x", "solver", 0, 1, 2, "e"},
		{"g1", "y", "verifier", 1, 0, 5, "e"},
		{"g1", "y", "solver", 1, 0.5, 5, "e"},
		{"g1", "z", "solver", 0, 0.25, 4, "e"},
		{"g1", "y", "solver", 0, 0.75, 5, "e"},
	}
	path := writeParquet(t, "no_tokens.parquet", in)
	res, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 5 || res.Parts != 2 || res.PolicyVersion != 5 || !reflect.DeepEqual(res.Agents, []string{"solver", "verifier"}) {
		t.Fatalf("result %+v", res)
	}
	m, parts := stagetest.ReadRollout(t, env, 0)
	if m.Params["policy_version"] != "5" || m.Params["source"] != "no_tokens.parquet" {
		t.Fatalf("params %v", m.Params)
	}
	var got []string
	for _, p := range parts {
		for _, r := range p {
			got = append(got, fmt.Sprintf("%s/%s/s%d/%d/%s/%g/v%d", r.UID, r.TrajUID, r.Sample, r.Step, r.Agent, r.Score, r.PolicyVersion))
			if len(r.PromptIDs)+len(r.ResponseIDs)+len(r.ResponseLogprobs) != 0 || r.EpisodeReward != r.Score || !r.Valid {
				t.Errorf("row %+v", r)
			}
		}
	}
	want := []string{
		"g1/y/s0/0/solver/0.75/v5", "g1/y/s0/1/solver/0.5/v5", "g1/y/s0/1/verifier/0/v5", "g1/z/s1/0/solver/0.25/v4",
		"g2/x/s0/0/solver/1/v2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: 0, Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
}

func TestParquetWithTokens(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	src := "math"
	in := []inTokens{
		{UID: 10, TrajUID: "b", Agent: "solver", Step: 0, Sample: 1, Score: 1, EpisodeReward: 1, Valid: true, DataSource: &src,
			PromptIDs: []int32{1, 2}, ResponseIDs: []int64{7, 8, 9}, ResponseLogprobs: []float32{-1, -2, -3}, PromptText: "p", ResponseText: "r", FinishReason: "stop"},
		{UID: 10, TrajUID: "a", Agent: "solver", Step: 0, Sample: 0, Score: 0, EpisodeReward: 0.5, Valid: false,
			PromptIDs: []int32{1}, ResponseIDs: nil, ResponseLogprobs: nil, FinishReason: "length"},
	}
	path := writeParquet(t, "tokens.parquet", in)
	if _, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 1, Parts: 4}); err != nil {
		t.Fatal(err)
	}
	_, parts := stagetest.ReadRollout(t, env, 1)
	if len(parts) != 1 || len(parts[0]) != 2 {
		t.Fatalf("parts %v", parts)
	}
	a, b := parts[0][0], parts[0][1]
	wantA := shards.Row{RowID: 0, Run: run, Iteration: 1, DataSource: "imported", TaskID: "10", UID: "10", TrajUID: "a", Sample: 0, Agent: "solver", Model: "m1",
		PromptIDs: []int32{1}, Valid: false, Score: 0, EpisodeReward: 0.5, FinishReason: "length"}
	wantB := shards.Row{RowID: 1, Run: run, Iteration: 1, DataSource: "math", TaskID: "10", UID: "10", TrajUID: "b", Sample: 1, Agent: "solver", Model: "m1",
		PromptIDs: []int32{1, 2}, ResponseIDs: []int32{7, 8, 9}, ResponseLogprobs: []float32{-1, -2, -3}, PromptText: "p", ResponseText: "r",
		Valid: true, Score: 1, EpisodeReward: 1, FinishReason: "stop"}
	// The reader gives empty lists as nil or empty: compare lengths for those.
	if len(a.ResponseIDs) != 0 || len(a.ResponseLogprobs) != 0 {
		t.Fatalf("row a lists %v %v", a.ResponseIDs, a.ResponseLogprobs)
	}
	a.ResponseIDs, a.ResponseLogprobs = nil, nil
	if !reflect.DeepEqual(a, wantA) {
		t.Errorf("row a\n got %+v\nwant %+v", a, wantA)
	}
	if !reflect.DeepEqual(b, wantB) {
		t.Errorf("row b\n got %+v\nwant %+v", b, wantB)
	}
}

func TestScoreColumn(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	path := writeFile(t, "r.ndjson", `{"uid":"u","traj_uid":"t","agent":"a","step":0,"reward":0.5,"score":"ignored"}`+"\n")
	if _, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0, ScoreColumn: "reward"}); err != nil {
		t.Fatal(err)
	}
	_, parts := stagetest.ReadRollout(t, env, 0)
	// Agent "a" is not in the config: its model defaults to its name (configured agents get
	// their configured model, as TestParquetWithTokens checks).
	if r := parts[0][0]; r.Score != 0.5 || r.EpisodeReward != 0.5 || r.Model != "a" {
		t.Fatalf("row %+v", r)
	}
	for _, col := range []string{"agent", "uid"} {
		if _, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 1, ScoreColumn: col}); err == nil || !strings.Contains(err.Error(), "another type") {
			t.Fatalf("score column %s: %v, want it refused as a column of another type", col, err)
		}
	}
}

func TestReimportAndConflict(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	path := writeFile(t, "small.jsonl", smallJSONL)
	if _, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 2}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, env)
	res, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 2})
	if err != nil || !res.Skipped {
		t.Fatalf("re-import: %+v, %v", res, err)
	}
	// The same content from a file of another name: already imported, nothing touched (it
	// was refused as "different content" naming two equal digests).
	renamed := writeFile(t, "copy.jsonl", smallJSONL)
	if res, err := importer.Run(ctx, env, importer.Options{Path: renamed, Iteration: 2}); err != nil || !res.Skipped {
		t.Fatalf("re-import under another name: %+v, %v", res, err)
	}
	// A different file (one score changed) into the same iteration: refused, nothing touched.
	other := writeFile(t, "small.jsonl", strings.Replace(smallJSONL, `"score":0.3`, `"score":0.4`, 1))
	_, err = importer.Run(ctx, env, importer.Options{Path: other, Iteration: 2})
	if !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "already committed") {
		t.Fatalf("conflict error: %v", err)
	}
	if te := (*stages.TakenError)(nil); !errors.As(err, &te) || te.Stage != "import" || te.Dir != layout.RolloutDir(env.Config.Run, 2) {
		t.Fatalf("conflict %v: want a *stages.TakenError of import naming %s, got %+v", err, layout.RolloutDir(env.Config.Run, 2), te)
	}
	// Same content, other part count: other files, also a conflict.
	_, err = importer.Run(ctx, env, importer.Options{Path: path, Iteration: 2, Parts: 1})
	if !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("conflict error: %v", err)
	}
	if after := snapshot(t, env); !reflect.DeepEqual(before, after) {
		t.Fatal("a refused import changed the store")
	}
	// Into a fresh iteration it works.
	if _, err := importer.Run(ctx, env, importer.Options{Path: other, Iteration: 3}); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, env *stages.Env) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys(t, env.Bucket) {
		data, err := storage.ReadAll(context.Background(), env.Bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = commit.Digest(data)
	}
	return out
}

func TestErrors(t *testing.T) {
	line := func(fields string) string {
		return `{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":1` + fields + "}\n"
	}
	ok := line("")
	cases := []struct {
		name, file, content string
		want                []string
	}{
		{"missing score", "a.jsonl", ok + `{"uid":"u1","traj_uid":"t2","agent":"a","step":0}` + "\n",
			[]string{"line 2: missing required field \"score\""}},
		{"wrong type", "a.jsonl", ok + `{"uid":"u1","traj_uid":"t2","agent":"a","step":"zero","score":1}` + "\n",
			[]string{"line 2: field \"step\": want an integer, got string \"zero\""}},
		{"NaN string", "a.jsonl", `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":"NaN"}` + "\n",
			[]string{"line 1: field \"score\": \"NaN\" is not finite"}},
		{"overflow", "a.jsonl", ok + "\n" + `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":1e999}` + "\n",
			[]string{"line 3: field \"score\": 1e999 is not finite"}},
		{"NaN literal", "a.jsonl", `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":NaN}` + "\n",
			[]string{"line 1: invalid JSON", "NaN and Infinity are not JSON"}},
		{"empty agent", "a.jsonl", ok + `{"uid":"u1","traj_uid":"t2","agent":"","step":0,"score":1}` + "\n",
			[]string{"line 2: field \"agent\": is empty"}},
		{"empty uid", "a.jsonl", `{"uid":" ","traj_uid":"t2","agent":"a","step":0,"score":1}` + "\n",
			[]string{"line 1: field \"uid\": is empty"}},
		{"duplicate", "a.jsonl", ok + line(`,"model":"m"`),
			[]string{`line 2: duplicate (traj_uid "t1", step 0, agent "a"): also on line 1`}},
		{"logprobs", "a.jsonl", line(`,"response_ids":[1,2,3],"response_logprobs":[-1,-2]`),
			[]string{"line 1: response_logprobs has 2 values for 3 response_ids"}},
		{"traj under two uids", "a.jsonl", ok + `{"uid":"u2","traj_uid":"t1","agent":"b","step":0,"score":1}` + "\n",
			[]string{`line 2: traj_uid "t1" is under uid "u2" here but under uid "u1" on line 1`}},
		{"sample on some rows", "a.jsonl", ok + `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":1,"sample":1}` + "\n",
			[]string{"line 2: sample is given on line 2 but not on line 1"}},
		{"two samples", "a.jsonl", line(`,"sample":0`) + `{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":1,"sample":0}` + "\n",
			[]string{`line 2: traj_uid "t2" and traj_uid "t1" (line 1) both have sample 0 in uid "u1"`}},
		{"not an object", "a.jsonl", "[1,2]\n", []string{"line 1: invalid JSON: want an object, got an array"}},
		{"field twice", "a.jsonl", `{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":1,"uid":"u2"}` + "\n",
			[]string{`line 1: field "uid" is given twice`}},
		{"truncated object", "a.jsonl", `{"uid":"u1","traj_uid":"t1"` + "\n", []string{"line 1: invalid JSON: unexpected EOF"}},
		{"trailing value", "a.jsonl", line("")[:len(line(""))-1] + ` {}` + "\n", []string{"line 1: invalid JSON: more than one value on the line"}},
		{"no rows", "a.jsonl", "\n\n", []string{"no rows"}},
		{"int32 range", "a.jsonl", line(`,"prompt_ids":[1,4294967296]`),
			[]string{"line 1: field \"prompt_ids\": element 1: 4294967296 does not fit int32"}},
		{"spaces in a name", "a.jsonl", `{"uid":"u1","traj_uid":"t2","agent":" a","step":0,"score":1}` + "\n",
			[]string{`line 1: field "agent": " a" has leading or trailing spaces`}},
		{"log-prob beyond float32", "a.jsonl", line(`,"response_ids":[1,2],"response_logprobs":[-1,-1e39]`),
			[]string{"line 1: field \"response_logprobs\": element 1"}},
		{"negative token id", "a.jsonl", line(`,"response_ids":[3,-1]`),
			[]string{"line 1: field \"response_ids\": element 1: token id -1 is negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			path := writeFile(t, tc.file, tc.content)
			_, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 1})
			checkErr(t, env, err, path, tc.want...)
		})
	}
}

func checkErr(t *testing.T, env *stages.Env, err error, path string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var ve *importer.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	for _, w := range append([]string{path}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
	if ks := keys(t, env.Bucket); len(ks) != 0 {
		t.Errorf("store not empty after a failed import: %v", ks)
	}
}

func TestManyProblems(t *testing.T) {
	env := newEnv(t)
	var sb strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&sb, `{"uid":"u","traj_uid":"t%d","agent":"a","step":0,"score":"NaN"}`+"\n", i)
	}
	path := writeFile(t, "many.jsonl", sb.String())
	_, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0})
	checkErr(t, env, err, path, "30 problems", "line 1:", "line 20:", "and 10 more problems")
	if strings.Contains(err.Error(), "line 21:") {
		t.Errorf("more than %d problems listed:\n%v", importer.MaxProblems, err)
	}
}

func TestParquetErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("NaN score", func(t *testing.T) {
		env := newEnv(t)
		path := writeParquet(t, "nan.parquet", []inNoTokens{
			{"g", "x", "a", 0, 1, 0, ""}, {"g", "x", "a", 1, 1, 0, ""}, {"g", "x", "a", 2, math.NaN(), 0, ""}, {"g", "x", "a", 3, math.Inf(-1), 0, ""},
		})
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path, "row 2: column \"score\": NaN is not finite", "row 3: column \"score\": -Inf is not finite")
	})
	t.Run("duplicate and empty agent", func(t *testing.T) {
		env := newEnv(t)
		path := writeParquet(t, "dup.parquet", []inNoTokens{
			{"g", "x", "a", 0, 1, 0, ""}, {"g", "x", "", 1, 1, 0, ""}, {"g", "x", "a", 0, 1, 0, ""},
		})
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path, `row 1: column "agent": is empty`, `row 2: duplicate (traj_uid "x", step 0, agent "a"): also on row 0`)
	})
	t.Run("logprobs length", func(t *testing.T) {
		env := newEnv(t)
		path := writeParquet(t, "lp.parquet", []inTokens{
			{UID: 1, TrajUID: "x", Agent: "a", ResponseIDs: []int64{1, 2}, ResponseLogprobs: []float32{-1}},
		})
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path, "row 0: response_logprobs has 1 values for 2 response_ids")
	})
	t.Run("missing and mistyped columns", func(t *testing.T) {
		type bad struct {
			UID   string `parquet:"uid"`
			Agent int32  `parquet:"agent"`
			Step  string `parquet:"step"`
			Score string `parquet:"score"`
		}
		env := newEnv(t)
		path := writeParquet(t, "bad.parquet", []bad{{"u", 1, "0", "1"}})
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path, `missing required column "traj_uid"`, `column "agent" has type INT32, want a string`,
			`column "step" has type BYTE_ARRAY, want an integer`, `column "score" has type BYTE_ARRAY, want a finite number`, "4 problems")
	})
	t.Run("null in a required column", func(t *testing.T) {
		type opt struct {
			UID     *string `parquet:"uid,optional"`
			TrajUID string  `parquet:"traj_uid"`
			Agent   string  `parquet:"agent"`
			Step    int32   `parquet:"step"`
			Score   float64 `parquet:"score"`
		}
		u := "u"
		env := newEnv(t)
		path := writeParquet(t, "null.parquet", []opt{{&u, "x", "a", 0, 1}, {nil, "y", "a", 0, 1}})
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path, `row 1: required column "uid" is null`)
	})
	for _, rgLie := range []bool{false, true} {
		t.Run(fmt.Sprintf("footer lies about the row count (in the row group: %v)", rgLie), func(t *testing.T) {
			env := newEnv(t)
			good := writeParquet(t, "good.parquet", []inNoTokens{{"g", "x", "a", 0, 1, 0, ""}})
			data, err := os.ReadFile(good)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			md := *f.Metadata()
			md.NumRows = 1 << 50
			want := "footer claims 1125899906842624 rows"
			if rgLie {
				md.NumRows = 1
				md.RowGroups[0].NumRows = 1 << 50
				want = "row group 0: read 1 rows, footer says 1125899906842624"
			}
			footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
			if err != nil {
				t.Fatal(err)
			}
			flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
			out := append(bytes.Clone(data[:len(data)-8-flen]), footer...)
			out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
			out = append(out, "PAR1"...)
			path := filepath.Join(t.TempDir(), "liar.parquet")
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
			checkErr(t, env, err, path, want)
		})
	}
	// Columns whose stored value is not the value they mean, as DuckDB writes them (12.34 is a
	// DECIMAL stored as 1234, a TIMESTAMP microseconds since 1970, a UINTEGER 3e9 a negative
	// INT32): each is named with the cast to write, nothing is imported. The same file with the
	// casts imports, and a UTINYINT step (stored as INT32, read exactly) is accepted as it is.
	t.Run("logical types", func(t *testing.T) {
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		write := func(name, sel string) string {
			path := filepath.Join(t.TempDir(), name)
			if _, err := db.Exec(fmt.Sprintf("COPY (%s) TO '%s' (FORMAT parquet)", sel, path)); err != nil {
				t.Fatal(err)
			}
			return path
		}
		env := newEnv(t)
		path := write("typed.parquet", `SELECT 'g' AS uid, 'x' AS traj_uid, 'a' AS agent, 0.5 AS step,
			12.34::DECIMAL(6,2) AS score, TIMESTAMP '2024-01-01' AS policy_version, 3000000000::UINTEGER AS sample`)
		_, err = importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path,
			`column "step" holds DECIMAL(2,1) values stored as INT32, which the import would misread, want an integer (int32): cast it (e.g. CAST(step AS INTEGER))`,
			`column "score" holds DECIMAL(6,2) values stored as INT32`, `CAST(score AS DOUBLE)`,
			`column "policy_version" holds TIMESTAMP`, `column "sample" holds INT(32,false) values`, "4 problems")
		ok := write("cast.parquet", `SELECT 'g' AS uid, 'x' AS traj_uid, 'solver' AS agent, 5::UTINYINT AS step,
			CAST(12.34::DECIMAL(6,2) AS DOUBLE) AS score`)
		if _, err := importer.Run(ctx, env, importer.Options{Path: ok, Iteration: 0}); err != nil {
			t.Fatal(err)
		}
		_, parts := stagetest.ReadRollout(t, env, 0)
		var rows []shards.Row
		for _, p := range parts {
			rows = append(rows, p...)
		}
		if len(rows) != 1 || rows[0].Step != 5 || rows[0].Score != 12.34 {
			t.Errorf("cast columns imported as %+v", rows)
		}
	})
	t.Run("not parquet", func(t *testing.T) {
		env := newEnv(t)
		path := writeFile(t, "junk.parquet", strings.Repeat("not a parquet file ", 10))
		_, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path)
	})
	t.Run("truncated", func(t *testing.T) {
		env := newEnv(t)
		good := writeParquet(t, "good.parquet", []inNoTokens{{"g", "x", "a", 0, 1, 0, ""}})
		data, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		// Keep the footer, damage the data pages.
		for i := 4; i < len(data)/2; i++ {
			data[i] = 0xff
		}
		path := filepath.Join(t.TempDir(), "damaged.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		checkErr(t, env, err, path)
	})
}

func TestFormatDetection(t *testing.T) {
	env := newEnv(t)
	path := writeFile(t, "data.txt", smallJSONL)
	if _, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0}); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Fatalf("unknown extension: %v", err)
	}
	if _, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0, Format: "jsonl"}); err != nil {
		t.Fatal(err)
	}
	// A JSONL file forced to parquet is a clear error, not a crash.
	env2 := newEnv(t)
	_, err := importer.Run(context.Background(), env2, importer.Options{Path: path, Iteration: 0, Format: "parquet"})
	checkErr(t, env2, err, path)
}

func TestPartition(t *testing.T) {
	cases := []struct {
		rows  []int
		parts int
		want  []int
	}{
		{[]int{1, 1, 1, 1}, 2, []int{0, 2, 4}},
		{[]int{10, 1, 1, 1}, 2, []int{0, 1, 4}},
		{[]int{1, 1, 1, 10}, 2, []int{0, 3, 4}},
		{[]int{5, 5, 5}, 3, []int{0, 1, 2, 3}},
		{[]int{100, 1, 1}, 3, []int{0, 1, 2, 3}},
		{[]int{3, 3, 3, 3, 3, 3}, 4, []int{0, 1, 3, 4, 6}}, // ties go to the earlier boundary
		{[]int{7}, 1, []int{0, 1}},
	}
	for _, tc := range cases {
		got := importer.Partition(tc.rows, tc.parts)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Partition(%v, %d) = %v, want %v", tc.rows, tc.parts, got, tc.want)
		}
		for p := 0; p < tc.parts; p++ {
			if got[p] >= got[p+1] {
				t.Errorf("Partition(%v, %d) = %v: empty part %d", tc.rows, tc.parts, got, p)
			}
		}
	}
}
