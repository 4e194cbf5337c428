package workflows

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTasksJSONL(t *testing.T) {
	p := writeFile(t, "gsm_small.jsonl", `{"id":"a","question":"1+1","answer":"2","data_source":"gsm"}

{"id":7,"question":"2*3","answer":6,"extra":true}
`)
	got, err := LoadTasks(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{{"a", "1+1", "2", "gsm"}, {"7", "2*3", "6", "gsm_small"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	// No trailing newline on the last line.
	p = writeFile(t, "x.jsonl", `{"id":"a","question":"q","answer":"b"}`)
	if got, err := LoadTasksWithDefault(p, "dflt"); err != nil || got[0].DataSource != "dflt" {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestLoadTasksJSONLErrors(t *testing.T) {
	cases := map[string]string{
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n{\"id\":\"b\",\"question\":\"q\"}\n": `t.jsonl:2: missing field "answer"`,
		"{\"id\":\"a\",\"answer\":\"1\"}\n":                                                                        `t.jsonl:1: missing field "question"`,
		"{\"question\":\"q\",\"answer\":\"1\"}\n":                                                                  `t.jsonl:1: missing field "id"`,
		"{\"id\":\"a\",\"question\":\"\",\"answer\":\"1\"}\n":                                                      `t.jsonl:1: missing field "question"`,
		"\n\n{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"\n":                                                  `t.jsonl:3:`,
		"{\"id\":\"a\",\"question\":[1],\"answer\":\"1\"}\n":                                                       `t.jsonl:1:`,
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n{\"id\":\"a\",\"question\":\"r\",\"answer\":\"2\"}\n": `t.jsonl:2: duplicate id "a" (first on line 1)`,
		"\n  \n": "t.jsonl: no tasks",
	}
	for content, want := range cases {
		p := writeFile(t, "t.jsonl", content)
		_, err := LoadTasks(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("content %q: err %v, want %q", content, err, want)
		}
	}
	if _, err := LoadTasks(writeFile(t, "t.csv", "id,question\n")); err == nil || !strings.Contains(err.Error(), "t.csv") {
		t.Errorf("csv: %v", err)
	}
	if _, err := LoadTasks(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("missing file accepted")
	}
}

// A byte order mark and CRLF line ends load; non-UTF-8 text, a JSON array
// and a pretty-printed object are errors that say what to fix (they were
// "invalid character 'ï'", a silent U+FFFD in the question, and an error
// naming a Go struct type).
func TestLoadTasksJSONLEncodings(t *testing.T) {
	p := writeFile(t, "bom.jsonl", "\ufeff{\"id\":\"a\",\"question\":\"1+1\",\"answer\":\"2\"}\r\n{\"id\":\"b\",\"question\":\"é\",\"answer\":\"3\"}\r\n")
	got, err := LoadTasks(p)
	if err != nil || !reflect.DeepEqual(got, []Task{{"a", "1+1", "2", "bom"}, {"b", "é", "3", "bom"}}) {
		t.Fatalf("BOM + CRLF: %+v %v", got, err)
	}
	cases := map[string]string{
		"{\"id\":\"a\",\"question\":\"q\xff\",\"answer\":\"1\"}\n":                                                     "t.jsonl:1: not valid UTF-8",
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n{\"id\":\"b\xe9\",\"question\":\"q\",\"answer\":\"1\"}\n": "t.jsonl:2: not valid UTF-8",
		"[{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}]\n":                                                       `t.jsonl:1: want one JSON object per line (JSONL), got a line starting with "["`,
		"{\n  \"id\": \"a\",\n  \"question\": \"q\",\n  \"answer\": \"1\"\n}\n":                                        "t.jsonl:1: want one JSON object per line (JSONL): unexpected end of JSON input",
		"\ufeff\ufeff{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n":                                             "t.jsonl:1: want one JSON object per line",
	}
	for content, want := range cases {
		_, err := LoadTasks(writeFile(t, "t.jsonl", content))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("content %q: err %v, want %q", content, err, want)
		}
	}
	p = writeParquet(t, "latin1.parquet", []pqTask{{"a", "caf\xe9", "1", nil}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `latin1.parquet: row 0: column "question": not valid UTF-8`) {
		t.Fatalf("parquet: err %v", err)
	}
}

type pqTask struct {
	ID         string  `parquet:"id"`
	Question   string  `parquet:"question"`
	Answer     string  `parquet:"answer"`
	DataSource *string `parquet:"data_source,optional"`
}

func writeParquet[T any](t *testing.T, name string, rows []T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(f, rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTasksParquet(t *testing.T) {
	src := "hard"
	p := writeParquet(t, "arith.parquet", []pqTask{{"a", "1+1", "2", &src}, {"b", "2+2", "4", nil}})
	got, err := LoadTasks(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{{"a", "1+1", "2", "hard"}, {"b", "2+2", "4", "arith"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	// Integer columns and no data_source column.
	type intRow struct {
		ID       int64  `parquet:"id"`
		Question string `parquet:"question"`
		Answer   int32  `parquet:"answer"`
	}
	p = writeParquet(t, "ints.parquet", []intRow{{1, "3*3", 9}, {2, "3-5", -2}})
	got, err = LoadTasks(p)
	if err != nil || !reflect.DeepEqual(got, []Task{{"1", "3*3", "9", "ints"}, {"2", "3-5", "-2", "ints"}}) {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestLoadTasksParquetErrors(t *testing.T) {
	p := writeParquet(t, "bad.parquet", []pqTask{{"a", "q", "1", nil}, {"b", "q", "", nil}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `bad.parquet: row 1: missing field "answer"`) {
		t.Fatalf("err %v", err)
	}
	type noAnswer struct {
		ID       string `parquet:"id"`
		Question string `parquet:"question"`
	}
	p = writeParquet(t, "noans.parquet", []noAnswer{{"a", "q"}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `noans.parquet: missing column "answer"`) {
		t.Fatalf("err %v", err)
	}
	p = writeParquet(t, "dup.parquet", []pqTask{{"a", "q", "1", nil}, {"a", "q", "1", nil}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `dup.parquet: row 1: duplicate id "a"`) {
		t.Fatalf("err %v", err)
	}
	type floatAns struct {
		ID       string  `parquet:"id"`
		Question string  `parquet:"question"`
		Answer   float64 `parquet:"answer"`
	}
	p = writeParquet(t, "float.parquet", []floatAns{{"a", "q", 1.5}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `float.parquet: row 0: column "answer"`) {
		t.Fatalf("err %v", err)
	}
	if _, err := LoadTasks(writeFile(t, "junk.parquet", "not parquet")); err == nil || !strings.Contains(err.Error(), "junk.parquet") {
		t.Fatalf("err %v", err)
	}
}

// Loaded tasks run through the workflows (math grades integers).
func TestLoadedTasksPlay(t *testing.T) {
	p := writeFile(t, "m.jsonl", `{"id":"a","question":"40+2","answer":" 42 "}`+"\n")
	tasks, err := LoadTasks(p)
	if err != nil {
		t.Fatal(err)
	}
	w := newWF(t, "math", nil)
	ep := w.NewEpisode(tasks[0])
	play(t, ep, "ans 42", "yes")
	if ep.Reward() != 1 {
		t.Fatal("loaded task not graded")
	}
	s := newWF(t, "search", nil)
	task := Task{ID: "x", Question: "who wrote hamlet", Answer: "Shakespeare"}
	demos := s.Demonstrations(task, nil, 0)
	if r := replay(t, s, task, demos); r != 1 {
		t.Fatalf("unknown-question demo reward %v: %+v", r, demos)
	}
}

// The data source "all" is the evaluation's aggregate row; a task of it (given, or by
// default from a file all.jsonl) would make a second "all" row.
func TestLoadTasksRejectsSourceAll(t *testing.T) {
	for name, content := range map[string]string{
		"t.jsonl":   "{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\",\"data_source\":\"all\"}\n",
		"all.jsonl": "{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n",
	} {
		_, err := LoadTasks(writeFile(t, name, content))
		if err == nil || !strings.Contains(err.Error(), name+`:1: data_source "all" is reserved`) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	p := writeParquet(t, "all.parquet", []pqTask{{"a", "q", "1", nil}})
	if _, err := LoadTasks(p); err == nil || !strings.Contains(err.Error(), `all.parquet: row 0: data_source "all" is reserved`) {
		t.Errorf("parquet: err %v", err)
	}
}
