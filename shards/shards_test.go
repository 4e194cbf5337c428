package shards_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
)

func encode(t testing.TB, part int, rows []shards.Row) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, part, rows); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTripAndDeterminism(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 1, Part: 3, Groups: 50, DropAgent: true})
	a := encode(t, 3, rows)
	b := encode(t, 3, shardtest.Rows(shardtest.Options{Seed: 1, Part: 3, Groups: 50, DropAgent: true}))
	if sha256.Sum256(a) != sha256.Sum256(b) {
		t.Fatal("same rows encoded to different bytes")
	}
	got, err := shards.ReadTrajectories(bytes.NewReader(a), int64(len(a)), "p")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("round trip differs: got %d rows, first %+v\nwant first %+v", len(got), got[0], rows[0])
	}
}

func TestManyRowGroups(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 2, Groups: 17000, Samples: 2, MaxSteps: 1, Tokens: 1})
	if len(rows) <= 2*shards.RowGroupRows {
		t.Fatalf("want > 2 row groups, have %d rows", len(rows))
	}
	data := encode(t, 0, rows)
	f, err := shards.OpenParquet(bytes.NewReader(data), int64(len(data)), "p")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.RowGroups()); n < 3 {
		t.Fatalf("%d row groups, want ≥ 3", n)
	}
}

func TestReadKeysMatchesRows(t *testing.T) {
	for _, groups := range []int{1, 7, 5000} {
		rows := shardtest.Rows(shardtest.Options{Seed: uint64(groups), Part: 1, Groups: groups, Agents: []string{"router", "searcher", "answerer"}, DropAgent: true, Tokens: 2})
		data := encode(t, 1, rows)
		f, err := shards.OpenParquet(bytes.NewReader(data), int64(len(data)), "p")
		if err != nil {
			t.Fatal(err)
		}
		k, err := shards.ReadKeys(context.Background(), f, "p")
		if err != nil {
			t.Fatal(err)
		}
		if k.Len() != len(rows) {
			t.Fatalf("%d keys, %d rows", k.Len(), len(rows))
		}
		for i, r := range rows {
			if k.RowID[i] != r.RowID || k.UIDs[k.Group[i]] != r.UID || k.Sample[i] != r.Sample ||
				k.Agents[k.Agent[i]] != r.Agent || k.Score[i] != r.Score {
				t.Fatalf("row %d: keys (%d %s %d %s %v) != row %+v", i, k.RowID[i], k.UIDs[k.Group[i]], k.Sample[i], k.Agents[k.Agent[i]], k.Score[i], r)
			}
			if i > 0 && (r.UID == rows[i-1].UID) != (k.Group[i] == k.Group[i-1]) {
				t.Fatalf("row %d: group code change does not follow uid change", i)
			}
		}
		if len(k.UIDs) != groups {
			t.Fatalf("%d group codes for %d uids", len(k.UIDs), groups)
		}
	}
}

func TestCheckPartReportsEveryProblem(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 3, Groups: 3})
	rows[1].RowID = 99
	rows[2].Score = nanValue()
	rows[3].Agent = ""
	rows[4].ResponseLogprobs = slices.Clone(rows[4].ResponseLogprobs)
	rows[4].ResponseLogprobs[len(rows[4].ResponseLogprobs)-1] = float32(math.Inf(-1))
	last := len(rows) - 1
	rows[last].UID = rows[0].UID // reappears after other uids
	err := shards.CheckPart(0, rows)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"row 1: row_id 99", "row 2: score NaN", "row 3: uid, traj_uid and agent", "must be contiguous",
		fmt.Sprintf("row 4: response log-prob %d is -Inf", len(rows[4].ResponseLogprobs)-1)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var buf bytes.Buffer
	if shards.WriteTrajectories(&buf, 0, rows) == nil || buf.Len() != 0 {
		t.Fatal("invalid rows were written")
	}
}

// TestCheckPartSortOrder: the writer refuses rows out of (uid, sample, step) order, which
// byte-identical reruns rely on, and accepts the same rows sorted.
func TestCheckPartSortOrder(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 3, Groups: 3, Samples: 2})
	if err := shards.CheckPart(0, rows); err != nil {
		t.Fatalf("sorted rows refused: %v", err)
	}
	at := func(rows []shards.Row, uid string, sample int32) int {
		for i, r := range rows {
			if r.UID == uid && r.Sample == sample {
				return i
			}
		}
		t.Fatalf("no row of uid %s sample %d", uid, sample)
		return -1
	}
	renumber := func(rows []shards.Row) []shards.Row {
		for i := range rows {
			rows[i].RowID = shards.RowID(0, i)
		}
		return rows
	}
	// Whole uids swapped: still contiguous, but not ascending.
	first, second := at(rows, rows[0].UID, 0), 0
	for rows[second].UID == rows[first].UID {
		second++
	}
	end := second
	for end < len(rows) && rows[end].UID == rows[second].UID {
		end++
	}
	swapped := renumber(slices.Concat(rows[second:end], rows[:second], rows[end:]))
	if err := shards.CheckPart(0, swapped); err == nil || !strings.Contains(err.Error(), "sorted by uid") {
		t.Errorf("uids out of order: %v", err)
	}
	// Samples swapped within one uid.
	s1 := at(rows, rows[0].UID, 1)
	samples := renumber(slices.Concat(rows[s1:second], rows[:s1], rows[second:]))
	if err := shards.CheckPart(0, samples); err == nil || !strings.Contains(err.Error(), "sorted by (uid, sample, step)") {
		t.Errorf("samples out of order: %v", err)
	}
	var buf bytes.Buffer
	if shards.WriteTrajectories(&buf, 0, samples) == nil || buf.Len() != 0 {
		t.Fatal("unsorted rows were written")
	}
}

func nanValue() float64 { z := 0.0; return z / z }

func TestMalformedFiles(t *testing.T) {
	good := encode(t, 0, shardtest.Rows(shardtest.Options{Seed: 4}))
	cases := map[string][]byte{
		"empty":     nil,
		"PAR1PAR1":  []byte("PAR1PAR1"),
		"truncated": good[:len(good)/2],
		"no footer": good[:len(good)-8],
		"junk":      bytes.Repeat([]byte{0xff}, 4096),
	}
	for name, data := range cases {
		if _, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), name); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
	// A valid Parquet file of another table is rejected with every missing column named.
	other, err := shards.EncodeTable([]struct {
		RowID int64  `parquet:"row_id"`
		UID   int64  `parquet:"uid"`
		X     string `parquet:"x"`
	}{{1, 2, "a"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = shards.ReadTrajectories(bytes.NewReader(other), int64(len(other)), "other.parquet")
	if err == nil || !strings.Contains(err.Error(), "missing column score") || !strings.Contains(err.Error(), "column uid is INT64") {
		t.Fatalf("want schema errors naming columns, got %v", err)
	}
}

// nullableRow is Row with uid and score nullable, as DuckDB and pyarrow write columns unless
// told NOT NULL.
type nullableRow struct {
	RowID            int64     `parquet:"row_id"`
	Run              string    `parquet:"run"`
	Iteration        int32     `parquet:"iteration"`
	PolicyVersion    int64     `parquet:"policy_version"`
	DataSource       string    `parquet:"data_source"`
	TaskID           string    `parquet:"task_id"`
	UID              *string   `parquet:"uid,optional"`
	TrajUID          string    `parquet:"traj_uid"`
	Sample           int32     `parquet:"sample"`
	Step             int32     `parquet:"step"`
	Agent            string    `parquet:"agent"`
	Model            string    `parquet:"model"`
	PromptIDs        []int32   `parquet:"prompt_ids,list"`
	ResponseIDs      []int32   `parquet:"response_ids,list"`
	ResponseLogprobs []float32 `parquet:"response_logprobs,list"`
	PromptText       string    `parquet:"prompt_text"`
	ResponseText     string    `parquet:"response_text"`
	Valid            bool      `parquet:"valid"`
	Score            *float64  `parquet:"score,optional"`
	EpisodeReward    float64   `parquet:"episode_reward"`
	FinishReason     string    `parquet:"finish_reason"`
}

// A file whose columns are nullable is refused by every reader, naming the columns: reading it
// into Row would turn a null uid or score into "" or 0 without a word.
func TestNullableColumnsRejected(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 3, Groups: 2, Samples: 2})
	nullable := make([]nullableRow, len(rows))
	for i, r := range rows {
		nullable[i] = nullableRow{RowID: r.RowID, Run: r.Run, TrajUID: r.TrajUID, Agent: r.Agent, Sample: r.Sample}
		if i != 1 { // row 1: null uid and score
			uid, score := r.UID, r.Score
			nullable[i].UID, nullable[i].Score = &uid, &score
		}
	}
	data, err := shards.EncodeTable(nullable)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s read a file with nullable uid and score", what)
		}
		for _, want := range []string{"nullable.parquet", "column uid is optional", "column score is optional"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %q does not say %q", what, err, want)
			}
		}
	}
	_, err = shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), "nullable.parquet")
	check("ReadTrajectories", err)
	_, err = shards.ReadTable[shards.Row](bytes.NewReader(data), int64(len(data)), "nullable.parquet")
	check("ReadTable", err)
	var kr shards.KeyReader
	_, err = kr.Read(context.Background(), bytesBucket{data: data}, "nullable.parquet", int64(len(data)))
	check("KeyReader", err)
	// Nullable columns where the struct has optional fields read as before.
	type opt struct {
		UID   *string  `parquet:"uid,optional"`
		Score *float64 `parquet:"score,optional"`
	}
	got, err := shards.ReadTable[opt](bytes.NewReader(data), int64(len(data)), "nullable.parquet")
	if err != nil || len(got) != len(rows) || got[1].UID != nil || got[0].Score == nil || *got[0].Score != rows[0].Score {
		t.Fatalf("ReadTable into optional fields: %d rows, %v", len(got), err)
	}
}

// OpenColumns reads list columns too (every leaf below the named top-level column), rather than
// calling an existing column missing.
func TestOpenColumnsListColumn(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 3, Groups: 2, Samples: 2})
	data := encode(t, 0, rows)
	pf, err := shards.OpenColumns(context.Background(), bytesBucket{data: data}, "p", int64(len(data)), []string{"row_id", "prompt_ids"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := pf.Schema().Lookup("prompt_ids", "list", "element")
	var got, want []int32
	for _, rg := range pf.RowGroups() {
		pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			v := p.Data()
			got = append(got, v.Int32()...)
		}
		pages.Close()
	}
	for _, r := range rows {
		want = append(want, r.PromptIDs...)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("prompt_ids through OpenColumns: %d values, want %d", len(got), len(want))
	}
	if _, err := shards.OpenColumns(context.Background(), bytesBucket{data: data}, "p", int64(len(data)), []string{"nope"}); err == nil || !strings.Contains(err.Error(), "missing column nope") {
		t.Fatalf("a missing column: %v", err)
	}
}

func TestPartNames(t *testing.T) {
	if got := shards.PartName(3, 8); got != "part-00003-of-00008.parquet" {
		t.Fatal(got)
	}
	i, n, err := shards.ParsePartName("part-00003-of-00008.parquet")
	if err != nil || i != 3 || n != 8 {
		t.Fatal(i, n, err)
	}
	for _, bad := range []string{"part-00008-of-00008.parquet", "part-3-of-8.parquet", "x.parquet"} {
		if _, _, err := shards.ParsePartName(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	p, pos := shards.SplitRowID(shards.RowID(7, 12345))
	if p != 7 || pos != 12345 {
		t.Fatal(p, pos)
	}
}

// TestArrowReadsShards reads a shard with arrow-go v18's pqarrow and compares every column.
func TestArrowReadsShards(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 5, Groups: 20, DropAgent: true})
	data := encode(t, 0, rows)
	// Not a CheckedAllocator: arrow-go v18.8.0's delta bit-pack decoder leaks 64 bytes per
	// column reader (its own bug, not a drmas allocation).
	mem := memory.DefaultAllocator
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 10}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.NumRows() != int64(len(rows)) {
		t.Fatalf("arrow read %d rows, want %d", tbl.NumRows(), len(rows))
	}
	got := make([]map[string]any, len(rows))
	for i := range got {
		got[i] = map[string]any{}
	}
	for c := 0; c < int(tbl.NumCols()); c++ {
		col := tbl.Column(c)
		row := 0
		for _, chunk := range col.Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				got[row][col.Name()] = arrowValue(t, chunk, i)
				row++
			}
		}
	}
	for i, r := range rows {
		if want := rowMap(r); !reflect.DeepEqual(got[i], want) {
			t.Fatalf("row %d:\narrow %v\nwant  %v", i, got[i], want)
		}
	}
}

func arrowValue(t *testing.T, a arrow.Array, i int) any {
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		var out []any
		for j := lo; j < hi; j++ {
			out = append(out, arrowValue(t, a.ListValues(), int(j)))
		}
		return out
	}
	t.Fatalf("unexpected arrow type %T", a)
	return nil
}

// rowMap is the expected column → value mapping, lists as []any of their element type.
func rowMap(r shards.Row) map[string]any {
	list := func(xs any) []any {
		v := reflect.ValueOf(xs)
		var out []any
		for i := 0; i < v.Len(); i++ {
			out = append(out, v.Index(i).Interface())
		}
		return out
	}
	return map[string]any{
		"row_id": r.RowID, "run": r.Run, "iteration": r.Iteration, "policy_version": r.PolicyVersion,
		"data_source": r.DataSource, "task_id": r.TaskID, "uid": r.UID, "traj_uid": r.TrajUID,
		"sample": r.Sample, "step": r.Step, "agent": r.Agent, "model": r.Model,
		"prompt_ids": list(r.PromptIDs), "response_ids": list(r.ResponseIDs), "response_logprobs": list(r.ResponseLogprobs),
		"prompt_text": r.PromptText, "response_text": r.ResponseText, "valid": r.Valid,
		"score": r.Score, "episode_reward": r.EpisodeReward, "finish_reason": r.FinishReason,
	}
}

// TestDuckDBReadsShards reads a shard with real DuckDB and compares every column.
func TestDuckDBReadsShards(t *testing.T) {
	rows := shardtest.Rows(shardtest.Options{Seed: 6, Groups: 20, DropAgent: true})
	path := filepath.Join(t.TempDir(), shards.PartName(0, 1))
	if err := os.WriteFile(path, encode(t, 0, rows), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query("SELECT * FROM read_parquet(?) ORDER BY row_id", path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	cols, _ := res.Columns()
	i := 0
	for ; res.Next(); i++ {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for j := range vals {
			ptrs[j] = &vals[j]
		}
		if err := res.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for j, c := range cols {
			got[c] = vals[j]
			if l, ok := vals[j].([]any); ok && len(l) == 0 {
				got[c] = []any(nil)
			}
		}
		if want := rowMap(rows[i]); !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d:\nduckdb %v\nwant   %v", i, got, want)
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(rows) {
		t.Fatalf("duckdb read %d rows, want %d", i, len(rows))
	}
}

// TestHugeFooterRefused: a footer above MaxFooterBytes (a file of very many tiny row groups)
// is refused with what to do, before parquet-go decodes it (which took about 40 times the
// footer's size in memory).
func TestHugeFooterRefused(t *testing.T) {
	size := int64(shards.MaxFooterBytes + 1<<20 + 12)
	data := make([]byte, size)
	copy(data, "PAR1")
	binary.LittleEndian.PutUint32(data[size-8:], uint32(shards.MaxFooterBytes+1))
	copy(data[size-4:], "PAR1")
	_, err := shards.OpenParquet(bytes.NewReader(data), size, "many.parquet")
	if err == nil || !strings.Contains(err.Error(), "many.parquet") || !strings.Contains(err.Error(), "larger row groups") {
		t.Fatalf("a %d-byte footer: %v", shards.MaxFooterBytes+1, err)
	}
}
