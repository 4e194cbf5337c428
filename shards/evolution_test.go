package shards_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
)

// TestEvalTablesReadWithoutF1: evaluation files written before the f1_mean column existed
// (shardtest's ResultRow and PromptRow) still read, with a null F1Mean, and a written F1Mean
// (and a null one) reads back as it was.
func TestEvalTablesReadWithoutF1(t *testing.T) {
	old, err := shards.EncodeTable([]shardtest.ResultRow{{Step: 3, Workflow: "math", DataSource: "all", K: 4, Prompts: 2, AvgAtK: 0.625, PassAtK: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := shards.ReadTable[shards.ResultRow](bytes.NewReader(old), int64(len(old)), "results.parquet")
	if err != nil {
		t.Fatalf("an old results file: %v", err)
	}
	want := shards.ResultRow{Step: 3, Workflow: "math", DataSource: "all", K: 4, Prompts: 2, AvgAtK: 0.625, PassAtK: 1}
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("old results read as %+v, want %+v", rows, want)
	}
	oldP, err := shards.EncodeTable([]shardtest.PromptRow{{Step: 3, Split: "eval", DataSource: "d", TaskID: "t1", Question: "q", K: 4, Successes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := shards.ReadTable[shards.PromptRow](bytes.NewReader(oldP), int64(len(oldP)), "prompts.parquet")
	if err != nil || len(prompts) != 1 || prompts[0].F1Mean != nil || prompts[0].Successes != 3 || prompts[0].TaskID != "t1" {
		t.Fatalf("an old prompts file: %+v, %v", prompts, err)
	}

	f1 := 0.75
	cur, err := shards.EncodeTable([]shards.ResultRow{{DataSource: "a", F1Mean: &f1}, {DataSource: "all"}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err = shards.ReadTable[shards.ResultRow](bytes.NewReader(cur), int64(len(cur)), "results.parquet")
	if err != nil || len(rows) != 2 || rows[0].F1Mean == nil || *rows[0].F1Mean != 0.75 || rows[1].F1Mean != nil {
		t.Fatalf("results with f1_mean: %+v, %v", rows, err)
	}
	// A required column is still required: an old reader's table refuses a file without it.
	type needsF1 struct {
		Step   int64   `parquet:"step"`
		F1Mean float64 `parquet:"f1_mean"`
	}
	if _, err := shards.ReadTable[needsF1](bytes.NewReader(old), int64(len(old)), "results.parquet"); err == nil || !strings.Contains(err.Error(), "missing column f1_mean") {
		t.Fatalf("a missing required column: %v", err)
	}
}
