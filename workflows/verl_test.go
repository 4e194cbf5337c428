package workflows

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Rows as DrMAS's drmas_math.py and drmas_search.py write them (trimmed).
const verlMathJSONL = `{"data_source": "math500", "ability": "math", "reward_model": {"style": "rule", "ground_truth": "\\frac{1}{2}"}, "prompt": [{"role": "user", "content": "What is 1/2?"}], "extra_info": {"split": "test", "index": 0, "answer": "\\frac{1}{2}", "question": "What is 1/2?"}, "env_kwargs": {"ground_truth": "\\frac{1}{2}", "question": "What is 1/2?", "data_source": "math500"}}
{"data_source": "aime24", "reward_model": {"style": "rule", "ground_truth": "204"}, "prompt": [{"role": "user", "content": "AIME problem"}], "extra_info": {"index": 0}}
`

const verlSearchJSONL = `{"data_source": "nq", "prompt": [{"role": "system", "content": "You are a helpful and harmless assistant."}, {"role": "user", "content": "who wrote hamlet"}], "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth": {"target": ["William Shakespeare", "Shakespeare"]}}, "extra_info": {"index": 7, "need_tools_kwargs": true, "question": "who wrote hamlet", "split": "test"}, "metadata": null, "env_kwargs": {"ground_truth": {"target": ["William Shakespeare", "Shakespeare"]}, "question": "who wrote hamlet", "data_source": "nq"}}
{"data_source": "hotpotqa", "prompt": [{"role": "user", "content": "capital of peru"}], "reward_model": {"ground_truth": ["Lima", 1]}}
`

func TestLoadVerlJSONL(t *testing.T) {
	p := writeFile(t, "test.jsonl", verlMathJSONL)
	if f, err := DetectTaskFormat(p); err != nil || f != FormatVerl {
		t.Fatalf("detected %q %v", f, err)
	}
	got, err := LoadTasksFormat(p, "")
	want := []Task{
		{ID: "math500-0", Question: "What is 1/2?", Answer: `\frac{1}{2}`, DataSource: "math500"},
		{ID: "aime24-0", Question: "AIME problem", Answer: "204", DataSource: "aime24"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v", got, err)
	}
	got, err = LoadTasksFormat(writeFile(t, "s.jsonl", verlSearchJSONL), FormatVerl)
	want = []Task{
		{ID: "nq-7", Question: "who wrote hamlet", Answer: `["William Shakespeare","Shakespeare"]`, DataSource: "nq"},
		{ID: "hotpotqa-line2", Question: "capital of peru", Answer: `["Lima","1"]`, DataSource: "hotpotqa"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v", got, err)
	}
	if g := GoldenAnswers(got[0].Answer); len(g) != 2 || g[1] != "Shakespeare" {
		t.Fatalf("golden %q", g)
	}
	// A drmas-format file is detected as such and loads as before.
	d := writeFile(t, "d.jsonl", `{"id": "a", "question": "1+1", "answer": "2"}`+"\n")
	if f, _ := DetectTaskFormat(d); f != FormatDrmas {
		t.Fatalf("drmas file detected as %q", f)
	}
	if got, err := LoadTasksFormat(d, FormatAuto); err != nil || len(got) != 1 || got[0].Answer != "2" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := LoadTasksFormat(d, "csv"); err == nil || !strings.Contains(err.Error(), "auto, drmas, verl") {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestVerlProblemsReportedAtOnce(t *testing.T) {
	bad := strings.Join([]string{
		`{"data_source": "x", "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 1}}`,                        // no question
		`{"data_source": "x", "prompt": [{"role": "user", "content": "q"}], "extra_info": {"index": 2}}`,                 // no truth
		`{"data_source": "x", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": []}}`,       // empty list
		`{"data_source": "x", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": {"a": 1}}}`, // bad object
		`not json`, // syntax
		`{"data_source": "x", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 9}}`,
		`{"data_source": "x", "prompt": [{"role": "user", "content": "r"}], "reward_model": {"ground_truth": "2"}, "extra_info": {"index": 9}}`, // duplicate id
		`{"data_source": "all", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "1"}}`,
	}, "\n")
	_, err := LoadVerlTasks(writeFile(t, "bad.jsonl", bad))
	var te *TaskFileError
	if !errors.As(err, &te) || te.Total != 7 {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{"line 1: no question", "line 2: no ground truth", "line 3: the ground truth is an empty list",
		`line 4: reward_model.ground_truth: an object must be {"target"`, "line 5: want one JSON object", `line 7: duplicate id "x-9" (first at line 6)`, "line 8: data_source \"all\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// verl rows as pandas/pyarrow write them: nested structs and LIST-encoded lists.
type pqMsg struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}
type pqTarget struct {
	Target []string `parquet:"target,list"`
}
type pqSearchRow struct {
	DataSource  string  `parquet:"data_source"`
	Prompt      []pqMsg `parquet:"prompt,list"`
	RewardModel struct {
		Style       string   `parquet:"style"`
		GroundTruth pqTarget `parquet:"ground_truth"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index    int64  `parquet:"index"`
		Question string `parquet:"question"`
	} `parquet:"extra_info"`
}
type pqMathRow struct {
	DataSource  string  `parquet:"data_source"`
	Prompt      []pqMsg `parquet:"prompt,list"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
	} `parquet:"reward_model"`
	EnvKwargs struct {
		GroundTruth string `parquet:"ground_truth"`
		Question    string `parquet:"question"`
	} `parquet:"env_kwargs"`
}

func TestLoadVerlParquet(t *testing.T) {
	var b bytes.Buffer
	s := []pqSearchRow{{DataSource: "nq", Prompt: []pqMsg{{"system", "sys"}, {"user", "who wrote hamlet"}}}, {DataSource: "nq", Prompt: []pqMsg{{"user", "capital of peru"}}}}
	s[0].RewardModel.GroundTruth.Target = []string{"William Shakespeare", "Shakespeare"}
	s[0].ExtraInfo.Index = 3
	s[1].RewardModel.GroundTruth.Target = []string{"Lima"}
	s[1].ExtraInfo.Index = 4
	if err := parquet.Write(&b, s); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, "search.parquet", b.String())
	if f, _ := DetectTaskFormat(p); f != FormatVerl {
		t.Fatalf("detected %q", f)
	}
	got, err := LoadTasksFormat(p, "")
	want := []Task{
		{ID: "nq-3", Question: "who wrote hamlet", Answer: `["William Shakespeare","Shakespeare"]`, DataSource: "nq"},
		{ID: "nq-4", Question: "capital of peru", Answer: `["Lima"]`, DataSource: "nq"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v", got, err)
	}
	b.Reset()
	m := []pqMathRow{{DataSource: "aime24", Prompt: []pqMsg{{"user", "prompt text"}}}, {DataSource: "aime24"}}
	m[0].EnvKwargs.GroundTruth, m[0].EnvKwargs.Question = "204", "env question"
	m[1].RewardModel.GroundTruth = "7" // no question anywhere
	if err := parquet.Write(&b, m); err != nil {
		t.Fatal(err)
	}
	_, err = LoadTasksFormat(writeFile(t, "math.parquet", b.String()), FormatVerl)
	if err == nil || !strings.Contains(err.Error(), "row 1: no question") || strings.Contains(err.Error(), "row 0") {
		t.Fatalf("%v", err)
	}
	m = m[:1]
	b.Reset()
	if err := parquet.Write(&b, m); err != nil {
		t.Fatal(err)
	}
	got, err = LoadTasksFormat(writeFile(t, "math.parquet", b.String()), FormatVerl)
	if err != nil || !reflect.DeepEqual(got, []Task{{ID: "aime24-row0", Question: "env question", Answer: "204", DataSource: "aime24"}}) {
		t.Fatalf("%+v %v", got, err)
	}
}
