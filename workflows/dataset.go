package workflows

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/drmas-dev/drmas/shards"
)

// LoadTasks reads tasks from a JSONL file (".jsonl", ".json", ".ndjson") or a
// Parquet file (".parquet"). Fields/columns: id, question, answer (required,
// non-empty) and data_source (optional; default: the file's base name without
// extension, e.g. "gsm_small" for gsm_small.jsonl). id and answer may be JSON
// strings or numbers (Parquet: string or integer columns). Blank JSONL lines
// are skipped; unknown fields are ignored; a UTF-8 byte order mark and CRLF
// line ends are fine. Text must be UTF-8. Errors name the file and the line
// (JSONL, from 1) or row (Parquet, from 0); a duplicate id is an error, and so
// is the data_source "all" (AllSources), given or by default (all.jsonl).
func LoadTasks(path string) ([]Task, error) {
	def := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return LoadTasksWithDefault(path, def)
}

// LoadTasksWithDefault is LoadTasks with an explicit default data_source.
func LoadTasksWithDefault(path, defaultSource string) ([]Task, error) {
	return loadByExt(path, defaultSource, loadJSONL, loadParquet)
}

// loadByExt reads a task file with the reader its extension names and refuses a file of no
// tasks.
func loadByExt(path, defaultSource string, jsonl, parquet func(path, def string) ([]Task, error)) ([]Task, error) {
	var (
		tasks []Task
		err   error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json", ".ndjson":
		tasks, err = jsonl(path, defaultSource)
	case ".parquet":
		tasks, err = parquet(path, defaultSource)
	default:
		return nil, fmt.Errorf("%s: unknown task file type (want .jsonl or .parquet)", path)
	}
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return tasks, nil
}

// jsonScalar accepts a JSON string or number as a string.
type jsonScalar struct {
	s   string
	set bool
}

func (j *jsonScalar) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		j.set = true
		return json.Unmarshal(b, &j.s)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("want a string or a number")
	}
	j.s, j.set = n.String(), true
	return nil
}

func loadJSONL(path, def string) ([]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var tasks []Task
	ids := map[string]int{}
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, rerr := r.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", path, line, rerr)
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
		}
		if trimmed := bytes.TrimSpace(b); len(trimmed) > 0 {
			if !utf8.Valid(b) {
				return nil, fmt.Errorf("%s:%d: not valid UTF-8 (convert the file to UTF-8)", path, line)
			}
			if trimmed[0] != '{' {
				return nil, fmt.Errorf("%s:%d: want one JSON object per line (JSONL), got a line starting with %q", path, line, trimmed[:1])
			}
			var rec struct {
				ID         jsonScalar `json:"id"`
				Question   jsonScalar `json:"question"`
				Answer     jsonScalar `json:"answer"`
				DataSource jsonScalar `json:"data_source"`
			}
			if err := checkTaskKeys(b); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				var se *json.SyntaxError
				if errors.As(err, &se) {
					return nil, fmt.Errorf("%s:%d: want one JSON object per line (JSONL): %w", path, line, err)
				}
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			t, err := checkTask(rec.ID.s, rec.Question.s, rec.Answer.s, rec.DataSource.s, def)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			if prev, dup := ids[t.ID]; dup {
				return nil, fmt.Errorf("%s:%d: duplicate id %q (first on line %d)", path, line, t.ID, prev)
			}
			ids[t.ID] = line
			tasks = append(tasks, t)
		}
		if rerr == io.EOF {
			return tasks, nil
		}
	}
}

// checkTaskKeys refuses a line that gives one of the task fields twice: encoding/json would
// keep the last silently ({"answer":"2","answer":"3"} trains on 3), and it matches keys
// without regard to case, so "Question" and "question" are the same field to it.
func checkTaskKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // json.Unmarshal reports it
	}
	seen := map[string]string{} // task field → the key that gave it
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		for _, f := range []string{"id", "question", "answer", "data_source"} {
			if !strings.EqualFold(key, f) {
				continue
			}
			if prev, dup := seen[f]; dup {
				if prev == key {
					return fmt.Errorf("field %q is given twice", key)
				}
				return fmt.Errorf("fields %q and %q both give %q (keys are matched without regard to case)", prev, key, f)
			}
			seen[f] = key
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

func checkTask(id, q, a, src, def string) (Task, error) {
	for _, f := range []struct{ name, v string }{{"id", id}, {"question", q}, {"answer", a}} {
		if strings.TrimSpace(f.v) == "" {
			return Task{}, fmt.Errorf("missing field %q", f.name)
		}
	}
	if strings.TrimSpace(src) == "" {
		src = def
	}
	if src == AllSources {
		return Task{}, fmt.Errorf("data_source %q is reserved for the evaluation's aggregate row (the default data_source is the file's base name): give the tasks another data_source", src)
	}
	return Task{ID: id, Question: q, Answer: a, DataSource: src}, nil
}

func loadParquet(path, def string) (tasks []Task, err error) {
	defer func() {
		// parquet-go panics on some malformed files (a page or footer that lies about its
		// sizes): that is a damaged file, not a crash.
		if p := recover(); p != nil {
			tasks, err = nil, fmt.Errorf("%s: malformed parquet (after %d tasks): %v", path, len(tasks), p)
		}
	}()
	return readParquetTasks(path, def, &tasks)
}

// readParquetTasks is loadParquet; it appends to *out as it goes, so that a panic reports how
// far it got.
func readParquetTasks(path, def string, out *[]Task) ([]Task, error) {
	f, pf, err := openTaskParquet(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := []string{"id", "question", "answer", "data_source"}
	cols := make([]int, len(names))
	for i, n := range names {
		leaf, ok := pf.Schema().Lookup(n)
		switch {
		case !ok && n == "data_source":
			cols[i] = -1
			continue
		case !ok:
			return nil, fmt.Errorf("%s: missing column %q", path, n)
		case leaf.MaxRepetitionLevel > 0:
			return nil, fmt.Errorf("%s: column %q is repeated, want a scalar", path, n)
		}
		cols[i] = leaf.ColumnIndex
	}
	tasks := *out
	ids := map[string]int64{}
	row := int64(0)
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				vals := make([]string, len(names))
				for i, c := range cols {
					if c < 0 {
						continue
					}
					for _, v := range r {
						if v.Column() == c {
							s, err := parquetString(v)
							if err != nil {
								rows.Close()
								return nil, fmt.Errorf("%s: row %d: column %q: %w", path, row, names[i], err)
							}
							vals[i] = s
							break
						}
					}
				}
				t, err := checkTask(vals[0], vals[1], vals[2], vals[3], def)
				if err != nil {
					rows.Close()
					return nil, fmt.Errorf("%s: row %d: %w", path, row, err)
				}
				if prev, dup := ids[t.ID]; dup {
					rows.Close()
					return nil, fmt.Errorf("%s: row %d: duplicate id %q (first in row %d)", path, row, t.ID, prev)
				}
				ids[t.ID] = row
				tasks = append(tasks, t)
				*out = tasks
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
	return tasks, nil
}

func parquetString(v parquet.Value) (string, error) {
	if v.IsNull() {
		return "", nil
	}
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		if !utf8.Valid(v.ByteArray()) {
			return "", errors.New("not valid UTF-8")
		}
		return string(v.ByteArray()), nil
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10), nil
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10), nil
	}
	return "", fmt.Errorf("unsupported type %s (want string or integer)", v.Kind())
}

// openTaskParquet opens a tasks file through shards.OpenParquet, which checks the footer and
// the page headers against the file before parquet-go allocates what they claim (a damaged
// 1 KB file could otherwise ask for gigabytes). The caller closes f.
func openTaskParquet(path string) (*os.File, *parquet.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		var pf *parquet.File
		if pf, err = shards.OpenParquet(f, st.Size(), path); err == nil {
			return f, pf, nil
		}
	}
	f.Close()
	return nil, nil, err
}
