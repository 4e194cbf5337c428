// Package shards defines drmas's on-storage row formats — trajectory rows written by rollout
// and the narrow advantage sidecars written by normalize — and their Parquet encoding.
//
// Promises:
//   - Writing is deterministic: the same rows produce the same bytes (fixed created_by, no
//     timestamps, fixed row-group size, zstd at a fixed level).
//   - Writers refuse rows that break the sort order or the partition rule (all rows of one uid
//     in one part), so readers may rely on groups being contiguous runs.
//   - Readers validate the schema and report every missing, mistyped or nullable (where the
//     row type needs a value) column at once, naming the file; malformed files give errors,
//     never panics.
package shards

import (
	"fmt"
	"regexp"
	"strconv"
)

// SchemaVersion is written into every manifest of a rollout or advantage folder. Bump it when
// a column changes meaning or type.
const SchemaVersion = 1

// Row is one agent invocation: the unit of a trajectory shard (docs/design.md, "Shard schemas").
//
// Column order in the file follows the field order here. Strings with few distinct values are
// dictionary-encoded. The key columns normalize reads (row_id, uid, sample, agent, score) are
// stored uncompressed: they are a few bytes a row next to ~500 of tokens, and skipping zstd on
// them halves the cost of decoding them.
type Row struct {
	// RowID identifies the row within its iteration: part index × 2^32 + position within the
	// part. It is unique in the iteration, stable across reruns, and computable by a worker that
	// sees only its own part (see RowID).
	RowID            int64     `parquet:"row_id,delta,uncompressed"`
	Run              string    `parquet:"run,dict"`
	Iteration        int32     `parquet:"iteration"`
	PolicyVersion    int64     `parquet:"policy_version"`
	DataSource       string    `parquet:"data_source,dict"`
	TaskID           string    `parquet:"task_id,dict"`
	UID              string    `parquet:"uid,dict,uncompressed"`
	TrajUID          string    `parquet:"traj_uid,dict"`
	Sample           int32     `parquet:"sample,uncompressed"`
	Step             int32     `parquet:"step"`
	Agent            string    `parquet:"agent,dict,uncompressed"`
	Model            string    `parquet:"model,dict"`
	PromptIDs        []int32   `parquet:"prompt_ids,list"`
	ResponseIDs      []int32   `parquet:"response_ids,list"`
	ResponseLogprobs []float32 `parquet:"response_logprobs,list"`
	PromptText       string    `parquet:"prompt_text"`
	ResponseText     string    `parquet:"response_text"`
	Valid            bool      `parquet:"valid"`
	Score            float64   `parquet:"score,uncompressed"`
	EpisodeReward    float64   `parquet:"episode_reward"`
	FinishReason     string    `parquet:"finish_reason,dict"`
}

// AdvantageRow is one row of a narrow advantage sidecar, row-aligned with its rollout part.
type AdvantageRow struct {
	RowID        int64   `parquet:"row_id"`
	UID          string  `parquet:"uid,dict"`
	Agent        string  `parquet:"agent,dict"`
	Advantage    float32 `parquet:"advantage"`
	BaselineMean float64 `parquet:"baseline_mean"`
	BaselineStd  float64 `parquet:"baseline_std"`
	GroupSize    int32   `parquet:"group_size"`
}

// RowID returns the row id of the pos-th row of part.
func RowID(part, pos int) int64 { return int64(part)<<32 | int64(pos) }

// SplitRowID inverts RowID.
func SplitRowID(id int64) (part, pos int) { return int(id >> 32), int(id & (1<<32 - 1)) }

// PartName names part i of n, e.g. "part-00003-of-00008.parquet".
func PartName(i, n int) string { return fmt.Sprintf("part-%05d-of-%05d.parquet", i, n) }

var partNameRE = regexp.MustCompile(`^part-(\d{5})-of-(\d{5})\.parquet$`)

// ParsePartName inverts PartName.
func ParsePartName(name string) (i, n int, err error) {
	m := partNameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, fmt.Errorf("%q is not a part name like part-00003-of-00008.parquet", name)
	}
	i, _ = strconv.Atoi(m[1])
	n, _ = strconv.Atoi(m[2])
	if n == 0 || i >= n {
		return 0, 0, fmt.Errorf("part name %q: index out of range", name)
	}
	return i, n, nil
}
