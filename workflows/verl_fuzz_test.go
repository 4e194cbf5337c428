package workflows

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// FuzzLoadVerl: any bytes as a verl-format .jsonl or .parquet tasks file give tasks that meet
// LoadTasks' rules or an error naming the file, never a panic, with memory proportional to the
// file. Run with: go test ./workflows -run '^$' -fuzz '^FuzzLoadVerl$' -fuzztime 30s
func FuzzLoadVerl(f *testing.F) {
	f.Add(false, []byte(verlMathJSONL))
	f.Add(false, []byte(verlSearchJSONL))
	f.Add(false, []byte(`{"prompt": [{"role": "user", "content": 1}], "reward_model": {"ground_truth": [null, {"x": 1}]}}`))
	var b bytes.Buffer
	s := []pqSearchRow{{DataSource: "nq", Prompt: []pqMsg{{"user", "q"}}}}
	s[0].RewardModel.GroundTruth.Target = []string{"a", "b"}
	if err := parquet.Write(&b, s); err != nil {
		f.Fatal(err)
	}
	f.Add(true, b.Bytes())
	f.Fuzz(func(t *testing.T, pq bool, data []byte) {
		name := "fz.jsonl"
		if pq {
			name = "fz.parquet"
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		tasks, err := LoadVerlTasks(p)
		runtime.ReadMemStats(&ms)
		if got, budget := ms.TotalAlloc-before, 64<<20+1000*uint64(len(data)); got > budget {
			t.Fatalf("allocated %d MiB for a %d-byte file", got>>20, len(data))
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
