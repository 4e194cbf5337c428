package shardtest

import "github.com/drmas-dev/drmas/shards"

// ResultRow is shards.ResultRow as evaluations wrote it before the f1_mean column, type name
// included (the Parquet schema's root name): the files of older runs, for schema-evolution
// tests.
type ResultRow struct {
	Step       int64   `parquet:"step"`
	Workflow   string  `parquet:"workflow,dict"`
	DataSource string  `parquet:"data_source,dict"`
	K          int32   `parquet:"k"`
	Prompts    int32   `parquet:"prompts"`
	AvgAtK     float64 `parquet:"avg_at_k"`
	PassAtK    float64 `parquet:"pass_at_k"`
}

// PromptRow is shards.PromptRow as evaluations wrote it before the f1_mean column.
type PromptRow struct {
	Step       int64  `parquet:"step"`
	Split      string `parquet:"split,dict"`
	DataSource string `parquet:"data_source,dict"`
	TaskID     string `parquet:"task_id"`
	Question   string `parquet:"question"`
	K          int32  `parquet:"k"`
	Successes  int32  `parquet:"successes"`
}

// ResultsBeforeF1 returns rows without their F1 column.
func ResultsBeforeF1(rows []shards.ResultRow) []ResultRow {
	out := make([]ResultRow, len(rows))
	for i, r := range rows {
		out[i] = ResultRow{r.Step, r.Workflow, r.DataSource, r.K, r.Prompts, r.AvgAtK, r.PassAtK}
	}
	return out
}

// PromptsBeforeF1 returns rows without their F1 column.
func PromptsBeforeF1(rows []shards.PromptRow) []PromptRow {
	out := make([]PromptRow, len(rows))
	for i, p := range rows {
		out[i] = PromptRow{p.Step, p.Split, p.DataSource, p.TaskID, p.Question, p.K, p.Successes}
	}
	return out
}
