package importer

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/shards"
)

// kind is the logical type of an input column, independent of the file format.
type kind int

const (
	kString    kind = iota // a string
	kID                    // a string, or an integer written as its decimal digits
	kInt32                 // an integer that fits int32
	kInt64                 // an integer
	kFloat                 // a finite number (integers accepted)
	kBool                  // true / false
	kIntList               // a list of token ids: integers ≥ 0 that fit int32
	kFloatList             // a list of finite numbers (stored as float32)
)

func (k kind) String() string {
	switch k {
	case kString:
		return "a string"
	case kID:
		return "a string or an integer"
	case kInt32:
		return "an integer (int32)"
	case kInt64:
		return "an integer (int64)"
	case kFloat:
		return "a finite number"
	case kBool:
		return "a boolean"
	case kIntList:
		return "a list of integers (int32)"
	case kFloatList:
		return "a list of finite numbers"
	}
	return "?"
}

// value is a decoded input cell; which field holds it depends on the column's kind.
type value struct {
	s      string
	i      int64
	f      float64
	b      bool
	ints   []int32
	floats []float32
}

// rec is one input row on its way to a shards.Row.
type rec struct {
	row shards.Row
	pos int // JSONL line (from 1) or Parquet row index (from 0)

	hasSample, hasTaskID, hasDataSource, hasModel, hasEpisodeReward, hasValid bool
	// missing is set when a required column had no usable value (the problem is already
	// reported); such a record takes no part in the cross-row checks.
	missing bool
}

// column describes one accepted input column.
type column struct {
	name     string
	kind     kind
	required bool
	check    func(v *value) error // optional extra rule on a decoded value
	set      func(r *rec, v *value)
}

func nonEmpty(v *value) error {
	switch t := strings.TrimSpace(v.s); {
	case t == "":
		return errors.New("is empty")
	case t != v.s: // " solver" would be an agent of its own, beside "solver"
		return fmt.Errorf("%s has leading or trailing spaces", quote(v.s))
	}
	return exact(v)
}

// exact refuses an id or name holding U+FFFD, the replacement character: what bytes that are
// not valid UTF-8, and JSON escapes of lone UTF-16 surrogates ("\ud800", "\udfff"), decode to
// (free text keeps it), so two ids that differ in the file would become one (two groups merged
// into one).
func exact(v *value) error {
	if strings.ContainsRune(v.s, utf8.RuneError) {
		return fmt.Errorf("%s holds U+FFFD, the replacement character: bytes that are not valid UTF-8, or an escape of a lone UTF-16 surrogate such as \\ud800, decode to it; an id or name must be the text itself (convert the file to UTF-8)", quote(v.s))
	}
	return nil
}

func nonNegative(v *value) error {
	if v.i < 0 {
		return fmt.Errorf("%d is negative", v.i)
	}
	return nil
}

// columns returns the accepted input columns; scoreCol names the column read as score.
func columns(scoreCol string) []column {
	return []column{
		{"uid", kID, true, nonEmpty, func(r *rec, v *value) { r.row.UID = v.s }},
		{"traj_uid", kID, true, nonEmpty, func(r *rec, v *value) { r.row.TrajUID = v.s }},
		{"agent", kString, true, nonEmpty, func(r *rec, v *value) { r.row.Agent = v.s }},
		{"step", kInt32, true, nonNegative, func(r *rec, v *value) { r.row.Step = int32(v.i) }},
		{scoreCol, kFloat, true, nil, func(r *rec, v *value) { r.row.Score = v.f }},
		{"sample", kInt32, false, nonNegative, func(r *rec, v *value) { r.row.Sample, r.hasSample = int32(v.i), true }},
		{"task_id", kID, false, exact, func(r *rec, v *value) { r.row.TaskID, r.hasTaskID = v.s, v.s != "" }},
		{"data_source", kString, false, exact, func(r *rec, v *value) { r.row.DataSource, r.hasDataSource = v.s, v.s != "" }},
		{"model", kString, false, exact, func(r *rec, v *value) { r.row.Model, r.hasModel = v.s, v.s != "" }},
		{"episode_reward", kFloat, false, nil, func(r *rec, v *value) { r.row.EpisodeReward, r.hasEpisodeReward = v.f, true }},
		{"valid", kBool, false, nil, func(r *rec, v *value) { r.row.Valid, r.hasValid = v.b, true }},
		{"prompt_ids", kIntList, false, nil, func(r *rec, v *value) { r.row.PromptIDs = v.ints }},
		{"response_ids", kIntList, false, nil, func(r *rec, v *value) { r.row.ResponseIDs = v.ints }},
		{"response_logprobs", kFloatList, false, nil, func(r *rec, v *value) { r.row.ResponseLogprobs = v.floats }},
		{"prompt_text", kString, false, nil, func(r *rec, v *value) { r.row.PromptText = v.s }},
		{"response_text", kString, false, nil, func(r *rec, v *value) { r.row.ResponseText = v.s }},
		{"finish_reason", kString, false, nil, func(r *rec, v *value) { r.row.FinishReason = v.s }},
		{"policy_version", kInt64, false, nonNegative, func(r *rec, v *value) { r.row.PolicyVersion = v.i }},
	}
}

// quote quotes s for an error message as a short excerpt with its length: a value of megabytes
// would otherwise be copied into every message about it.
func quote(s string) string { return excerpt.Quote(s) }

// assign applies a decoded value to r after the column's own rule.
func assign(r *rec, c *column, v *value) error {
	if c.check != nil {
		if err := c.check(v); err != nil {
			return err
		}
	}
	c.set(r, v)
	return nil
}

// checkInt range-checks an integer for kind k.
func checkInt(k kind, i int64) error {
	if (k == kInt32 || k == kIntList) && (i < math.MinInt32 || i > math.MaxInt32) {
		return fmt.Errorf("%d does not fit int32", i)
	}
	if k == kIntList && i < 0 {
		return fmt.Errorf("token id %d is negative", i)
	}
	return nil
}

func checkFinite(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v is not finite", f)
	}
	return nil
}

// checkFloat32 rejects a finite value that overflows float32.
func checkFloat32(f float64) error {
	if g := float32(f); math.IsInf(float64(g), 0) {
		return fmt.Errorf("%v overflows float32", f)
	}
	return nil
}

// finish applies the defaults of the optional columns and the per-row checks that span
// columns. It returns the row's problems.
func finish(r *rec) []string {
	var probs []string
	row := &r.row
	if len(row.ResponseLogprobs) != 0 && len(row.ResponseLogprobs) != len(row.ResponseIDs) {
		probs = append(probs, fmt.Sprintf("response_logprobs has %d values for %d response_ids", len(row.ResponseLogprobs), len(row.ResponseIDs)))
	}
	if !r.hasTaskID {
		row.TaskID = row.UID
	}
	if !r.hasDataSource {
		row.DataSource = DefaultDataSource
	}
	if !r.hasModel {
		row.Model = row.Agent // Run maps a configured agent to its model instead
	}
	if !r.hasEpisodeReward {
		row.EpisodeReward = row.Score
	}
	if !r.hasValid {
		row.Valid = true
	}
	return probs
}

// MaxProblems is how many problems a ValidationError lists before it only counts them.
const MaxProblems = 20

// Problem is one thing wrong with the input.
type Problem struct {
	// Pos is the JSONL line (from 1) or the Parquet row index (from 0); −1 for the file as a
	// whole (a missing or mistyped column, a malformed file).
	Pos int
	Msg string
}

// ValidationError lists what is wrong with an input file. Nothing was written to the store.
type ValidationError struct {
	File     string
	Unit     string    // "line" (JSONL) or "row" (Parquet)
	Problems []Problem // the first MaxProblems, in file order
	Total    int       // all problems found
}

func (e *ValidationError) Error() string {
	var sb strings.Builder
	s := "s"
	if e.Total == 1 {
		s = ""
	}
	fmt.Fprintf(&sb, "%d problem%s (nothing was written):", e.Total, s)
	for _, p := range e.Problems {
		if p.Pos >= 0 {
			fmt.Fprintf(&sb, "\n  %s: %s %d: %s", e.File, e.Unit, p.Pos, p.Msg)
		} else {
			fmt.Fprintf(&sb, "\n  %s: %s", e.File, p.Msg)
		}
	}
	if n := e.Total - len(e.Problems); n > 0 {
		fmt.Fprintf(&sb, "\n  and %d more problems", n)
	}
	return sb.String()
}

// problems collects a ValidationError.
type problems struct{ e ValidationError }

func (p *problems) add(pos int, format string, args ...any) {
	p.e.Total++
	if len(p.e.Problems) < MaxProblems {
		p.e.Problems = append(p.e.Problems, Problem{Pos: pos, Msg: fmt.Sprintf(format, args...)})
	}
}

func (p *problems) err() error {
	if p.e.Total == 0 {
		return nil
	}
	e := p.e
	return &e
}
