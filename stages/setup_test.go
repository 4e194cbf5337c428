package stages

import (
	"fmt"
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

// TestWorkflowAgentsMatchTheConfig: every config in configs/ names exactly its workflow's
// agents; an agent the workflow never runs (a typo, or a leftover of another workflow) is an
// error naming it, and so is a missing one.
func TestWorkflowAgentsMatchTheConfig(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	for _, f := range files {
		cfg, err := configs.Load(configs.LoadOptions{File: f, LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := Workflow(cfg); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cfg := configs.Default()
	cfg.Agents["critic"] = cfg.Agents["solver"]
	if _, err := Workflow(cfg); err == nil || !strings.Contains(err.Error(), "agents.critic: workflow math has no such agent (its agents: solver, verifier)") {
		t.Fatalf("an extra agent: %v", err)
	}
	delete(cfg.Agents, "critic")
	delete(cfg.Agents, "verifier")
	if _, err := Workflow(cfg); err == nil || !strings.Contains(err.Error(), "no agents.verifier entry") {
		t.Fatalf("a missing agent: %v", err)
	}
}

// TestTrainTasksNeverRepeatATask: a dataset smaller than tasks.per_iteration is an error (up
// front in CheckTasks, and in TrainTasks), not an iteration that samples a task twice under
// one uid; a dataset of exactly per_iteration tasks gives each task once per iteration.
func TestTrainTasksNeverRepeatATask(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(p, []byte(`{"id":"a","question":"1+1","answer":"2"}
{"id":"b","question":"2+2","answer":"4"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	cfg.Tasks.Source, cfg.Tasks.PerIteration = p, 4
	const want = "tasks.per_iteration is 4 but"
	if _, err := TrainTasks(cfg, wf, 0); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("TrainTasks: %v", err)
	}
	if err := CheckTasks(cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckTasks: %v", err)
	}
	cfg.Tasks.PerIteration = 2
	for iter := range 3 {
		tasks, err := TrainTasks(cfg, wf, iter)
		if err != nil || len(tasks) != 2 || tasks[0].ID == tasks[1].ID {
			t.Fatalf("iteration %d: %v %v", iter, tasks, err)
		}
	}
}

// TestHardFracZeroMeansNoHardTasks: workflow.hard_frac 0 is a share like any other (it was
// taken as "unset" and became the workflow's own default, 0.5).
func TestHardFracZeroMeansNoHardTasks(t *testing.T) {
	for _, frac := range []float64{0, 1} {
		cfg := configs.Default()
		cfg.Workflow.HardFrac = frac
		wf, err := Workflow(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := TrainTasks(cfg, wf, 0)
		if err != nil {
			t.Fatal(err)
		}
		hard := 0
		for _, task := range tasks {
			if task.DataSource == "math_hard" {
				hard++
			}
		}
		if want := int(frac) * len(tasks); hard != want {
			t.Errorf("hard_frac %v: %d of %d tasks are hard, want %d", frac, hard, len(tasks), want)
		}
	}
}

// TestHeldOutPromptsAreNotTrainingPrompts: an evaluate.source file that shares questions with
// the tasks.source file is refused (by question, whatever the ids), up front and at evaluation.
func TestHeldOutPromptsAreNotTrainingPrompts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := configs.Default()
	cfg.Tasks.PerIteration = 2
	cfg.Tasks.Source = write("train.jsonl", `{"id":"a","question":"1+1","answer":"2"}
{"id":"b","question":"2+2","answer":"4"}
`)
	// y's question differs from b's only by what the prompt does not show (spaces around it, a
	// tab as a space): the same prompt.
	cfg.Evaluate.Source = write("eval.jsonl", `{"id":"x","question":"3+3","answer":"6"}
{"id":"y","question":" 2+2\t","answer":"4"}
`)
	wf, err := Workflow(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := "evaluate.source: 1 of its 2 held-out prompts are training prompts of tasks.source (the same question as the prompts show it), e.g. y (training task b)"
	if err := CheckTasks(cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckTasks: %v, want %q", err, want)
	}
	if _, err := EvalTasks(cfg, wf); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("EvalTasks: %v, want %q", err, want)
	}
	cfg.Evaluate.Source = write("eval2.jsonl", `{"id":"x","question":"3+3","answer":"6"}`+"\n")
	if err := CheckTasks(cfg); err != nil {
		t.Errorf("disjoint files: %v", err)
	}
	if tasks, err := EvalTasks(cfg, wf); err != nil || len(tasks) != 1 || tasks[0].ID != "x" {
		t.Errorf("EvalTasks of disjoint files: %v, %v", tasks, err)
	}

	// Held-out prompts from the workflow's generator (evaluate.source unset) are checked against
	// the tasks.source file too: a file holding two of them is refused, counting every held-out
	// prompt that repeats them.
	cfg.Evaluate.Source, cfg.Tasks.Source = "generator", "generator"
	gen, err := EvalTasks(cfg, wf)
	if err != nil || len(gen) != cfg.Tasks.EvalSize {
		t.Fatalf("generated held-out prompts: %d, %v", len(gen), err)
	}
	q0, q1 := gen[0].Question, gen[len(gen)-1].Question
	shared := 0
	for _, g := range gen {
		if g.Question == q0 || g.Question == q1 {
			shared++
		}
	}
	cfg.Tasks.Source = write("leak.jsonl", fmt.Sprintf(`{"id":"a","question":%q,"answer":"1"}
{"id":"b","question":"1000+1000","answer":"2000"}
{"id":"c","question":%q,"answer":"1"}
`, q0, q1))
	want = fmt.Sprintf("tasks.source: %d of the %d held-out prompts (the workflow's held-out split: evaluate.source is generator) are training prompts of the file", shared, len(gen))
	if err := CheckTasks(cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckTasks of a file holding held-out questions: %v, want %q", err, want)
	}
	if _, err := EvalTasks(cfg, wf); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("EvalTasks of a file holding held-out questions: %v, want %q", err, want)
	}
	cfg.Tasks.Source = write("clean.jsonl", `{"id":"b","question":"1000+1000","answer":"2000"}
{"id":"d","question":"1000+1001","answer":"2001"}
`)
	if err := CheckTasks(cfg); err != nil {
		t.Errorf("a file without held-out questions: %v", err)
	}
	if tasks, err := EvalTasks(cfg, wf); err != nil || len(tasks) != len(gen) {
		t.Errorf("EvalTasks with a clean file: %d tasks, %v", len(tasks), err)
	}
}
