package configs

import (
	"strings"
	"testing"
	"time"
)

func TestTasksFormatAndRetrieverKeys(t *testing.T) {
	env := map[string]string{"DRMAS_TASKS_FORMAT": "verl", "DRMAS_WORKFLOW_RETRIEVER_URL": "http://127.0.0.1:8000/retrieve",
		"DRMAS_WORKFLOW_RETRIEVER_TIMEOUT": "5s", "DRMAS_WORKFLOW_PASSAGE_BYTES": "64"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := Load(LoadOptions{LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workflow
	if c.Tasks.Format != "verl" || w.RetrieverURL != "http://127.0.0.1:8000/retrieve" || w.RetrieverTimeout != 5*time.Second || w.PassageBytes != 64 {
		t.Fatalf("%+v %+v", c.Tasks, w)
	}
	c = Default()
	c.Tasks.Format = "csv"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tasks.format: csv, want one of auto, drmas, verl") {
		t.Fatalf("%v", err)
	}
	c = Default()
	c.Workflow.RetrieverURL = "127.0.0.1:8000"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "workflow.retriever_url") {
		t.Fatalf("%v", err)
	}
}
