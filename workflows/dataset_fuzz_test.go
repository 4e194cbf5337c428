package workflows

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// checkTasks asserts LoadTasks' documented invariants on what it accepted.
func checkTasks(t *testing.T, tasks []Task) {
	t.Helper()
	if len(tasks) == 0 {
		t.Fatal("accepted with no tasks")
	}
	ids := map[string]bool{}
	for i, k := range tasks {
		if strings.TrimSpace(k.ID) == "" || strings.TrimSpace(k.Question) == "" || strings.TrimSpace(k.Answer) == "" || strings.TrimSpace(k.DataSource) == "" {
			t.Fatalf("task %d has a blank field: %+v", i, k)
		}
		if k.DataSource == AllSources {
			t.Fatalf("task %d has the reserved data_source", i)
		}
		if ids[k.ID] {
			t.Fatalf("duplicate id %q accepted", k.ID)
		}
		ids[k.ID] = true
	}
}

// FuzzLoadTasksJSONL: a tasks file is tasks that meet LoadTasks' rules, or an error naming the
// file; what loads, written back as JSONL, loads to the same tasks. Run with:
// go test ./workflows -run '^$' -fuzz '^FuzzLoadTasksJSONL$' -fuzztime 30s
func FuzzLoadTasksJSONL(f *testing.F) {
	for _, s := range []string{
		"{\"id\":\"a\",\"question\":\"1+1\",\"answer\":\"2\"}\n{\"id\":2,\"question\":\"2+2\",\"answer\":4,\"data_source\":\"x\"}\n",
		"\xef\xbb\xbf{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\r\n\r\n",
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\"}\n",
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":null}\n",
		"{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\",\"data_source\":\"all\"}\n",
		"[1,2]\n", "{\"id\":\"a\",\"question\":\"caf\xe9\",\"answer\":\"1\"}\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "fz.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tasks, err := LoadTasks(p)
		if err != nil {
			if tasks != nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v (with %d tasks) does not name the file", err, len(tasks))
			}
			return
		}
		checkTasks(t, tasks)
		again, err := LoadTasks(p)
		if err != nil || !reflect.DeepEqual(again, tasks) {
			t.Fatal("the same file loaded differently")
		}
		var b bytes.Buffer
		for _, k := range tasks {
			line, err := json.Marshal(k)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		q := filepath.Join(dir, "back.jsonl")
		if err := os.WriteFile(q, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		back, err := LoadTasks(q)
		if err != nil {
			t.Fatalf("tasks written back do not load: %v", err)
		}
		if !reflect.DeepEqual(back, tasks) {
			t.Fatalf("tasks changed through a write and load:\n%+v\n%+v", tasks, back)
		}
	})
}

// FuzzLoadTasksParquet: any bytes in a .parquet tasks file give tasks that meet LoadTasks'
// rules or an error naming the file, never a panic, and memory stays proportional to the file
// (a footer's sizes are not trusted). Run with:
// go test ./workflows -run '^$' -fuzz '^FuzzLoadTasksParquet$' -fuzztime 30s
func FuzzLoadTasksParquet(f *testing.F) {
	src := "s"
	var b bytes.Buffer
	if err := parquet.Write(&b, []pqTask{{"a", "1+1", "2", &src}, {"b", "2+2", "4", nil}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	type intRow struct {
		ID       int64  `parquet:"id"`
		Question string `parquet:"question"`
		Answer   int32  `parquet:"answer"`
	}
	b.Reset()
	if err := parquet.Write(&b, []intRow{{1, "3*3", 9}, {2, "3-5", -2}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "fz.parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		tasks, err := LoadTasks(p)
		runtime.ReadMemStats(&ms)
		if got, budget := ms.TotalAlloc-before, 64<<20+1000*uint64(len(data)); got > budget {
			t.Fatalf("allocated %d MiB for a %d-byte file (budget %d MiB)", got>>20, len(data), budget>>20)
		}
		if err != nil {
			if tasks != nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v (with %d tasks) does not name the file", err, len(tasks))
			}
			return
		}
		checkTasks(t, tasks)
	})
}
