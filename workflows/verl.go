package workflows

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/shards"
)

// Task file formats (tasks.format): FormatAuto detects the format from the file's fields.
const (
	FormatAuto  = "auto"
	FormatDrmas = "drmas" // id, question, answer, data_source (LoadTasks)
	FormatVerl  = "verl"  // the verl/DrMAS preprocessed format (LoadVerlTasks)
)

// TaskFormats lists the values of tasks.format ("" means FormatAuto).
var TaskFormats = []string{FormatAuto, FormatDrmas, FormatVerl}

// LoadTasksFormat is LoadTasks with the file's format given: FormatDrmas, FormatVerl, or
// FormatAuto / "" to detect it (DetectTaskFormat).
func LoadTasksFormat(path, format string) ([]Task, error) {
	switch format {
	case "", FormatAuto:
		f, err := DetectTaskFormat(path)
		if err != nil {
			return nil, err
		}
		format = f
	case FormatDrmas, FormatVerl:
	default:
		return nil, fmt.Errorf("%s: unknown tasks format %s (want %s)", excerpt.Name(path), excerpt.Quote(format), strings.Join(TaskFormats, ", "))
	}
	if format == FormatVerl {
		return LoadVerlTasks(path)
	}
	return LoadTasks(path)
}

// maxDetectLine bounds the first JSONL line read to detect a format.
const maxDetectLine = 16 << 20

// DetectTaskFormat tells a verl-format file from a drmas one: a file whose records (JSONL:
// its first object; Parquet: its schema) have no "question" field but a "prompt",
// "reward_model" or "env_kwargs" one is FormatVerl, anything else FormatDrmas (whose loader
// then reports what is wrong).
func DetectTaskFormat(path string) (string, error) {
	var fields []string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return "", err
		}
		pf, err := shards.OpenParquet(f, st.Size(), path)
		if err != nil {
			return FormatDrmas, nil
		}
		for _, fl := range pf.Schema().Fields() {
			fields = append(fields, fl.Name())
		}
	case ".jsonl", ".json", ".ndjson":
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), maxDetectLine)
		for sc.Scan() {
			line := bytes.TrimPrefix(bytes.TrimSpace(sc.Bytes()), []byte("\xef\xbb\xbf"))
			if len(line) == 0 {
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) == nil {
				for k := range m {
					fields = append(fields, k)
				}
			}
			break
		}
	default:
		return FormatDrmas, nil // LoadTasks names the extensions it knows
	}
	has := func(name string) bool {
		for _, f := range fields {
			if f == name {
				return true
			}
		}
		return false
	}
	if !has("question") && (has("prompt") || has("reward_model") || has("env_kwargs")) {
		return FormatVerl, nil
	}
	return FormatDrmas, nil
}

// maxTaskProblems is how many unusable rows a TaskFileError lists before it only counts them.
const maxTaskProblems = 20

// TaskFileError lists every unusable row of a tasks file at once, as `drmas import` does: the
// first 20 with their JSONL line (from 1) or Parquet row (from 0), then a count.
type TaskFileError struct {
	File     string
	Unit     string // "line" or "row"
	Problems []string
	Total    int
}

func (e *TaskFileError) Error() string {
	var b strings.Builder
	s := "s"
	if e.Total == 1 {
		s = ""
	}
	fmt.Fprintf(&b, "%s: %d unusable %s%s:", e.File, e.Total, e.Unit, s)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s: %s", e.File, p)
	}
	if n := e.Total - len(e.Problems); n > 0 {
		fmt.Fprintf(&b, "\n  and %d more", n)
	}
	return b.String()
}

func (e *TaskFileError) add(pos int64, format string, args ...any) {
	e.Total++
	if len(e.Problems) < maxTaskProblems {
		e.Problems = append(e.Problems, fmt.Sprintf("%s %d: ", e.Unit, pos)+fmt.Sprintf(format, args...))
	}
}

// verlRecord is what a verl row gives, before checks.
type verlRecord struct {
	dataSource   string
	envQuestion  string
	infoQuestion string
	roles        []string
	contents     []string
	envTruth     []string // nil: absent; one element: a single answer
	envTruthList bool
	rmTruth      []string
	rmTruthList  bool
	index        string
}

// task checks a record and builds its task; the id is "<data_source>-<extra_info.index>", or
// "<data_source>-<unit><pos>" without an index.
func (r *verlRecord) task(def, unit string, pos int64) (Task, error) {
	src := strings.TrimSpace(r.dataSource)
	if src == "" {
		src = def
	}
	if src == AllSources {
		return Task{}, fmt.Errorf("data_source %q is reserved for the evaluation's aggregate row: give the tasks another data_source", src)
	}
	q := r.envQuestion
	if strings.TrimSpace(q) == "" {
		q = r.infoQuestion
	}
	if strings.TrimSpace(q) == "" && len(r.roles) == len(r.contents) {
		for i := len(r.roles) - 1; i >= 0; i-- {
			if r.roles[i] == "user" {
				q = r.contents[i]
				break
			}
		}
	}
	if strings.TrimSpace(q) == "" {
		return Task{}, errors.New("no question: want env_kwargs.question, extra_info.question or a user message in prompt")
	}
	truth, list := r.envTruth, r.envTruthList
	if truth == nil {
		truth, list = r.rmTruth, r.rmTruthList
	}
	var answer string
	switch {
	case truth == nil:
		return Task{}, errors.New("no ground truth: want env_kwargs.ground_truth or reward_model.ground_truth")
	case list:
		var nonEmpty []string
		for _, t := range truth {
			if strings.TrimSpace(t) != "" {
				nonEmpty = append(nonEmpty, t)
			}
		}
		if len(nonEmpty) == 0 {
			return Task{}, errors.New("the ground truth is an empty list")
		}
		b, _ := json.Marshal(nonEmpty)
		answer = string(b)
	default:
		answer = truth[0]
	}
	if strings.TrimSpace(answer) == "" {
		return Task{}, errors.New("the ground truth is empty")
	}
	id := src + "-" + unit + strconv.FormatInt(pos, 10)
	if r.index != "" {
		id = src + "-" + r.index
	}
	return Task{ID: id, Question: q, Answer: answer, DataSource: src}, nil
}

// LoadVerlTasks reads a tasks file in the verl/DrMAS preprocessed format (as DrMAS's
// examples/data_preprocess/drmas_math.py and drmas_search.py write it), JSONL or Parquet:
//
//   - data_source (default: the file's base name);
//   - the question: env_kwargs.question, else extra_info.question, else the last user
//     message of prompt (a list of {role, content});
//   - the answer: env_kwargs.ground_truth, else reward_model.ground_truth: a string or a
//     number, or a list of golden answers (also as Search-R1's {"target": [...]}), kept as a
//     JSON list (see GoldenAnswers);
//   - the id: "<data_source>-<extra_info.index>", else "<data_source>-line<N>" / "-row<N>".
//
// Other fields (ability, extra_info's others, metadata) are ignored. Every unusable row is
// reported at once (*TaskFileError), as are duplicate ids.
func LoadVerlTasks(path string) ([]Task, error) {
	def := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return loadByExt(path, def, loadVerlJSONL, loadVerlParquet)
}

// collector gathers tasks and problems in file order.
type collector struct {
	tasks []Task
	ids   map[string]int64
	errs  TaskFileError
}

func (c *collector) add(r *verlRecord, def string, pos int64) {
	t, err := r.task(def, c.errs.Unit, pos)
	if err != nil {
		c.errs.add(pos, "%v", err)
		return
	}
	if prev, dup := c.ids[t.ID]; dup {
		c.errs.add(pos, "duplicate id %q (first at %s %d)", t.ID, c.errs.Unit, prev)
		return
	}
	c.ids[t.ID] = pos
	c.tasks = append(c.tasks, t)
}

func (c *collector) result() ([]Task, error) {
	if c.errs.Total > 0 {
		e := c.errs
		return nil, &e
	}
	return c.tasks, nil
}

func loadVerlJSONL(path, def string) ([]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &collector{ids: map[string]int64{}, errs: TaskFileError{File: path, Unit: "line"}}
	r := bufio.NewReader(f)
	for line := int64(1); ; line++ {
		b, rerr := r.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", path, line, rerr)
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			if rec, err := parseVerlJSON(b); err != nil {
				c.errs.add(line, "%v", err)
			} else {
				c.add(rec, def, line)
			}
		}
		if rerr == io.EOF {
			return c.result()
		}
	}
}

func parseVerlJSON(b []byte) (*verlRecord, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8 (convert the file to UTF-8)")
	}
	var row struct {
		DataSource  json.RawMessage `json:"data_source"`
		Prompt      json.RawMessage `json:"prompt"`
		RewardModel *struct {
			GroundTruth json.RawMessage `json:"ground_truth"`
		} `json:"reward_model"`
		ExtraInfo *struct {
			Index    json.RawMessage `json:"index"`
			Question json.RawMessage `json:"question"`
		} `json:"extra_info"`
		EnvKwargs *struct {
			GroundTruth json.RawMessage `json:"ground_truth"`
			Question    json.RawMessage `json:"question"`
		} `json:"env_kwargs"`
	}
	if err := json.Unmarshal(b, &row); err != nil {
		return nil, fmt.Errorf("want one JSON object per line (JSONL): %w", err)
	}
	rec := &verlRecord{}
	var err error
	field := func(name string, raw json.RawMessage, dst *string) {
		if err == nil {
			if *dst, err = jsonText(raw); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	field("data_source", row.DataSource, &rec.dataSource)
	if row.ExtraInfo != nil {
		field("extra_info.index", row.ExtraInfo.Index, &rec.index)
		field("extra_info.question", row.ExtraInfo.Question, &rec.infoQuestion)
	}
	if row.EnvKwargs != nil {
		field("env_kwargs.question", row.EnvKwargs.Question, &rec.envQuestion)
		if err == nil {
			if rec.envTruth, rec.envTruthList, err = jsonTruth(row.EnvKwargs.GroundTruth); err != nil {
				err = fmt.Errorf("env_kwargs.ground_truth: %w", err)
			}
		}
	}
	if row.RewardModel != nil && err == nil {
		if rec.rmTruth, rec.rmTruthList, err = jsonTruth(row.RewardModel.GroundTruth); err != nil {
			err = fmt.Errorf("reward_model.ground_truth: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(row.Prompt) > 0 && string(row.Prompt) != "null" {
		var msgs []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(row.Prompt, &msgs); err != nil {
			return nil, fmt.Errorf("prompt: want a list of {role, content}: %w", err)
		}
		for _, m := range msgs {
			rec.roles, rec.contents = append(rec.roles, m.Role), append(rec.contents, m.Content)
		}
	}
	return rec, nil
}

// jsonText reads a JSON string or number as text ("" for absent or null).
func jsonText(raw json.RawMessage) (string, error) {
	var j jsonScalar
	if len(raw) == 0 {
		return "", nil
	}
	if err := j.UnmarshalJSON(raw); err != nil {
		return "", err
	}
	return j.s, nil
}

// jsonTruth reads a ground truth: a string or number (one answer), a list of them, or
// {"target": list}. answers is nil when it is absent or null.
func jsonTruth(raw json.RawMessage) (answers []string, list bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	if raw[0] == '{' {
		var obj struct {
			Target json.RawMessage `json:"target"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || len(obj.Target) == 0 || obj.Target[0] != '[' {
			return nil, false, errors.New(`an object must be {"target": [answers]}`)
		}
		raw = obj.Target
	}
	if raw[0] == '[' {
		var items []jsonScalar
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, false, fmt.Errorf("want a list of strings or numbers: %w", err)
		}
		out := []string{}
		for _, it := range items {
			out = append(out, it.s)
		}
		return out, true, nil
	}
	s, err := jsonText(raw)
	if err != nil {
		return nil, false, err
	}
	return []string{s}, false, nil
}

// verlColumns are the leaf columns a verl Parquet file may have, by path with the list
// wrappers (list/element, bag/array_element, …) dropped.
var verlColumns = []string{
	"data_source", "prompt.role", "prompt.content", "extra_info.index", "extra_info.question",
	"env_kwargs.question", "env_kwargs.ground_truth", "env_kwargs.ground_truth.target",
	"reward_model.ground_truth", "reward_model.ground_truth.target",
}

// leafName drops the names that Parquet's LIST encodings insert between a list and its
// elements.
func leafName(path []string) string {
	var out []string
	for i, p := range path {
		if i > 0 && (p == "list" || p == "element" || p == "item" || p == "array" || p == "bag" || p == "array_element") {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

func loadVerlParquet(path, def string) (tasks []Task, err error) {
	defer func() {
		// parquet-go panics on some malformed files: that is a damaged file, not a crash.
		if p := recover(); p != nil {
			tasks, err = nil, fmt.Errorf("%s: malformed parquet: %v", path, p)
		}
	}()
	f, pf, err := openTaskParquet(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cols := map[int]string{} // column index → verl column
	repeated := map[string]bool{}
	for _, p := range pf.Schema().Columns() {
		name := leafName(p)
		for _, want := range verlColumns {
			if name == want {
				leaf, _ := pf.Schema().Lookup(p...)
				cols[leaf.ColumnIndex] = name
				repeated[name] = leaf.MaxRepetitionLevel > 0
			}
		}
	}
	c := &collector{ids: map[string]int64{}, errs: TaskFileError{File: path, Unit: "row"}}
	row := int64(0)
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				if rec, err := verlParquetRecord(r, cols, repeated); err != nil {
					c.errs.add(row, "%v", err)
				} else {
					c.add(rec, def, row)
				}
				row++
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				rows.Close()
				return nil, fmt.Errorf("%s: row %d: %w", path, row, rerr)
			}
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return c.result()
}

func verlParquetRecord(r parquet.Row, cols map[int]string, repeated map[string]bool) (*verlRecord, error) {
	vals := map[string][]string{}
	for _, v := range r {
		name, ok := cols[v.Column()]
		if !ok || v.IsNull() {
			continue
		}
		s, err := parquetText(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		vals[name] = append(vals[name], s)
	}
	one := func(name string) string {
		if v := vals[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	rec := &verlRecord{
		dataSource: one("data_source"), envQuestion: one("env_kwargs.question"), infoQuestion: one("extra_info.question"),
		index: one("extra_info.index"), roles: vals["prompt.role"], contents: vals["prompt.content"],
	}
	truth := func(base string) ([]string, bool) {
		if v, ok := vals[base+".target"]; ok || repeated[base+".target"] {
			return append([]string{}, v...), true
		}
		v, ok := vals[base]
		if !ok {
			if repeated[base] {
				return []string{}, true // an empty list
			}
			return nil, false
		}
		return v, repeated[base]
	}
	rec.envTruth, rec.envTruthList = truth("env_kwargs.ground_truth")
	rec.rmTruth, rec.rmTruthList = truth("reward_model.ground_truth")
	return rec, nil
}

// parquetText reads a string, integer or floating-point value as text.
func parquetText(v parquet.Value) (string, error) {
	switch v.Kind() {
	case parquet.Float:
		return strconv.FormatFloat(float64(v.Float()), 'g', -1, 32), nil
	case parquet.Double:
		if f := v.Double(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64), nil
		}
		return "", errors.New("not a finite number")
	case parquet.Boolean:
		return "", errors.New("a boolean, want a string or a number")
	}
	return parquetString(v)
}
