package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/workflows"
)

func TestTrainTasksRejectsNegativeIteration(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	body := `{"id":"a","question":"1+1","answer":"2"}
{"id":"b","question":"2+2","answer":"4"}
{"id":"c","question":"3+3","answer":"6"}
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{"generator", p} {
		cfg := configs.Default()
		cfg.Tasks.Source, cfg.Tasks.PerIteration = source, 2
		if _, err := TrainTasks(cfg, wf, -1); err == nil || !strings.Contains(err.Error(), "iteration -1") {
			t.Errorf("source %s: iteration -1 gave %v, want an error naming it", source, err)
		}
	}
	// A dataset window cycles through the file: iteration 1 of 2 per iteration starts at task 2.
	cfg := configs.Default()
	cfg.Tasks.Source, cfg.Tasks.PerIteration = p, 2
	got, err := TrainTasks(cfg, wf, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != "c" || got[1].ID != "a" {
		t.Fatalf("iteration 1: got %s, %s; want c, a", got[0].ID, got[1].ID)
	}
}
