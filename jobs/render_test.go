package jobs

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func testOptions() Options {
	return Options{
		Run:         "demo",
		Iteration:   7,
		Parallelism: 4,
		Image:       "registry.example.com/drmas:v0.3.0",
		Namespace:   "ml",
		S3Secret:    DefaultS3Secret,
		GPUsPerPod:  1,
		CPU:         "2",
		Memory:      "8Gi",
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./jobs -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./jobs -update rewrites it); got:\n%s", path, got)
	}
}

// decode splits a multi-document YAML stream and decodes each document into a Job.
func decode(t *testing.T, data []byte) []*batchv1.Job {
	t.Helper()
	var out []*batchv1.Job
	for _, doc := range strings.Split("\n"+string(data), "\n---\n")[1:] {
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(doc), &j); err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		out = append(out, &j)
	}
	return out
}

func roundTrip(t *testing.T, header string, jobs ...*batchv1.Job) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, header, jobs...); err != nil {
		t.Fatal(err)
	}
	back := decode(t, buf.Bytes())
	if len(back) != len(jobs) {
		t.Fatalf("decoded %d documents, want %d", len(back), len(jobs))
	}
	for i := range jobs {
		// Quantities cache their string form; compare them by value, the rest exactly.
		a, b := normalize(jobs[i]), normalize(back[i])
		if !reflect.DeepEqual(a, b) {
			ya, _ := MarshalJob(a)
			yb, _ := MarshalJob(b)
			t.Fatalf("job %d does not decode to the original:\n%s\nvs\n%s", i, ya, yb)
		}
	}
	return buf.Bytes()
}

func normalize(j *batchv1.Job) *batchv1.Job {
	j = j.DeepCopy()
	for i := range j.Spec.Template.Spec.Containers {
		r := &j.Spec.Template.Spec.Containers[i].Resources
		for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
			for k, q := range l {
				l[k] = *resourceFromString(q.String())
			}
		}
	}
	return j
}

func TestStageJobGolden(t *testing.T) {
	j, err := StageJob(func() Options { o := testOptions(); o.Stage = "rollout"; return o }())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "stage-rollout.yaml", roundTrip(t, "", j))
}

func TestIterationGolden(t *testing.T) {
	o := testOptions()
	js, err := IterationJobs(o)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "iteration.yaml", roundTrip(t, IterationHeader(o.Namespace, js...), js...))
	script, err := IterationScript(o.Namespace, js...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "iteration.sh", []byte(script))
}

func TestIterationJobs(t *testing.T) {
	js, err := IterationJobs(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for i, j := range js {
		stages = append(stages, j.Labels[LabelStage])
		if got := j.Spec.Suspend != nil && *j.Spec.Suspend; got != (i > 0) {
			t.Errorf("%s: suspend %v, want %v (only the first Job starts)", j.Name, got, i > 0)
		}
		c := j.Spec.Template.Spec.Containers[0]
		wantArgs := []string{"run-stage", stages[i], "--iter", "7", "--config", ConfigPath}
		if !reflect.DeepEqual(c.Args, wantArgs) {
			t.Errorf("%s: args %q, want %q", j.Name, c.Args, wantArgs)
		}
		p := int(*j.Spec.Parallelism)
		if stages[i] == "learn" && p != 1 {
			t.Errorf("learn parallelism %d, want 1", p)
		}
		if stages[i] != "learn" && p != 4 {
			t.Errorf("%s parallelism %d, want 4", stages[i], p)
		}
		_, gpu := c.Resources.Limits[GPUResource]
		if gpu != (stages[i] != "normalize") {
			t.Errorf("%s: GPU limit %v", stages[i], gpu)
		}
	}
	if !reflect.DeepEqual(stages, IterationStages) {
		t.Fatalf("stages %v", stages)
	}
	// Failed shards tolerated by rollout and normalize: learn, one pod, keeps what Kubernetes
	// accepts (maxFailedIndexes ≤ completions), or the API server refuses its Job after the
	// rollout Job was created.
	o := testOptions()
	o.MaxFailedIndexes = ptr[int32](2)
	js, err = IterationJobs(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if m, c := *j.Spec.MaxFailedIndexes, *j.Spec.Completions; m > c || (c > 1 && m != 2) {
			t.Errorf("%s: maxFailedIndexes %d with completions %d", j.Name, m, c)
		}
	}
}

// The invariants every rendered Job keeps, over every stage and awkward run names.
func TestJobInvariants(t *testing.T) {
	runs := []string{"demo", "Exp_07.A", "ünïcode run!", "", "-x-", strings.Repeat("very-long-run-name", 10), strings.Repeat("A", 63) + "_b"}
	for _, run := range runs {
		for _, st := range Stages {
			for _, gpus := range []int{0, 2} {
				o := testOptions()
				o.Run, o.Stage, o.GPUsPerPod = run, st.Name, gpus
				if !st.Sharded {
					o.Parallelism = 1
				}
				j, err := StageJob(o)
				if err != nil {
					t.Fatalf("run %q stage %s: %v", run, st.Name, err)
				}
				checkJob(t, j, st, o)
				roundTrip(t, "", j)
			}
		}
	}
}

func checkJob(t *testing.T, j *batchv1.Job, st StageSpec, o Options) {
	t.Helper()
	for _, e := range validation.IsDNS1123Subdomain(j.Name) {
		t.Errorf("name %q: %s", j.Name, e)
	}
	for _, e := range validation.IsValidLabelValue(j.Name) {
		t.Errorf("name %q as job-name label: %s", j.Name, e)
	}
	// Indexed pods get the hostname <job>-<index>.
	for _, e := range validation.IsDNS1123Label(j.Name + "-" + strconv.Itoa(MaxShards-1)) {
		t.Errorf("hostname of %q: %s", j.Name, e)
	}
	for _, labels := range []map[string]string{j.Labels, j.Spec.Template.Labels} {
		for k, v := range labels {
			for _, e := range validation.IsQualifiedName(k) {
				t.Errorf("label key %q: %s", k, e)
			}
			for _, e := range validation.IsValidLabelValue(v) {
				t.Errorf("label %s=%q: %s", k, v, e)
			}
		}
		if labels[LabelName] != "drmas" || labels[LabelStage] != st.Name || labels[LabelRun] != LabelValue(o.Run) {
			t.Errorf("labels %v", labels)
		}
		if _, ok := labels[LabelIteration]; ok != st.Iter {
			t.Errorf("%s: iteration label %v", st.Name, labels)
		}
	}
	s := j.Spec
	p := int32(o.Parallelism)
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != p || *s.Parallelism != p ||
		*s.PodReplacementPolicy != batchv1.Failed || s.BackoffLimitPerIndex == nil || s.MaxFailedIndexes == nil || s.BackoffLimit != nil {
		t.Errorf("job spec %+v", s)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || len(ps.Containers) != 1 {
		t.Fatalf("pod spec %+v", ps)
	}
	c := ps.Containers[0]
	secrets := 0
	for _, e := range c.Env {
		switch e.Name {
		case EnvShardCount:
			if e.Value != strconv.Itoa(o.Parallelism) {
				t.Errorf("%s=%q", e.Name, e.Value)
			}
		case EnvAccessKey, EnvSecretKey:
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != o.S3Secret || e.ValueFrom.SecretKeyRef.Key != e.Name {
				t.Errorf("credential %s not from the Secret: %+v", e.Name, e)
			}
			secrets++
		}
	}
	if secrets != 2 {
		t.Errorf("%d credentials from the Secret, want 2", secrets)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("requests %v", c.Resources.Requests)
	}
	q, gpu := c.Resources.Limits[GPUResource]
	if want := st.GPU && o.GPUsPerPod > 0; gpu != want || (gpu && q.Value() != int64(o.GPUsPerPod)) {
		t.Errorf("%s with --gpus-per-pod %d: GPU limit %v", st.Name, o.GPUsPerPod, c.Resources.Limits)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != ConfigDir || ps.Volumes[0].ConfigMap == nil {
		t.Errorf("config mount %+v %+v", c.VolumeMounts, ps.Volumes)
	}
	if c.Args[0] != "run-stage" || c.Args[1] != st.Name || c.Args[len(c.Args)-1] != ConfigPath {
		t.Errorf("args %q", c.Args)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		run, stage string
		iter       int
		want       string
	}{
		{"demo", "rollout", 7, "drmas-demo-rollout-7"},
		{"Exp_07.A", "learn", 12, "drmas-exp-07-a-learn-12"},
		{"demo", "warmup", -1, "drmas-demo-warmup"},
		{"", "normalize", 0, "drmas-run-normalize-0"},
	} {
		if got := Name(tc.run, tc.stage, tc.iter); got != tc.want {
			t.Errorf("Name(%q, %q, %d) = %q, want %q", tc.run, tc.stage, tc.iter, got, tc.want)
		}
	}
	long := strings.Repeat("experiment", 8)
	a, b := Name(long+"-a", "normalize", 123456), Name(long+"-b", "normalize", 123456)
	if a == b || len(a) > MaxNameLen || !strings.HasSuffix(a, "-normalize-123456") || !strings.HasPrefix(a, "drmas-experiment") {
		t.Errorf("long names %q %q", a, b)
	}
	if v := LabelValue(strings.Repeat("x", 100)); len(v) > 63 || v == LabelValue(strings.Repeat("x", 101)) {
		t.Errorf("long label value %q", v)
	}
}

func TestStageJobErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{"unknown stage", func(o *Options) { o.Stage = "train" }, `unknown stage "train"`},
		{"learn sharded", func(o *Options) { o.Stage = "learn" }, "not sharded"},
		{"negative parallelism", func(o *Options) { o.Parallelism = -1 }, "parallelism -1 out of range"},
		{"too many shards", func(o *Options) { o.Parallelism = MaxShards + 1 }, "out of range"},
		{"no iteration", func(o *Options) { o.Iteration = -1 }, "needs an iteration"},
		{"bad cpu", func(o *Options) { o.CPU = "lots" }, `cpu request "lots"`},
		{"bad memory", func(o *Options) { o.Memory = "8 GB" }, `memory request "8 GB"`},
		{"negative gpus", func(o *Options) { o.GPUsPerPod = -1 }, "gpus per pod"},
		{"bad pull policy", func(o *Options) { o.ImagePullPolicy = "Sometimes" }, `image pull policy "Sometimes": want Always, IfNotPresent or Never`},
		{"negative ttl", func(o *Options) { o.TTLSecondsAfterFinished = ptr[int32](-5) }, "ttl seconds after finished -5 < 0"},
		{"bad namespace", func(o *Options) { o.Namespace = "Bad_NS" }, `namespace "Bad_NS": want at most 63 lowercase`},
		{"long namespace", func(o *Options) { o.Namespace = strings.Repeat("n", 64) }, "namespace"},
		{"config env not DRMAS_", func(o *Options) { o.ConfigEnv = map[string]string{"AWS_SECRET_ACCESS_KEY": "x"} }, "config env AWS_SECRET_ACCESS_KEY"},
		{"config env shard count", func(o *Options) { o.ConfigEnv = map[string]string{EnvShardCount: "9"} }, "config env DRMAS_SHARD_COUNT"},
		{"step on rollout", func(o *Options) { o.EvalStep = ptr[int64](3) }, "stage rollout takes no evaluation step"},
		{"more failed indexes than shards", func(o *Options) { o.MaxFailedIndexes = ptr[int32](5) }, "max failed indexes 5 > parallelism 4"},
		{"failed indexes on a one-pod stage", func(o *Options) { o.Stage, o.Parallelism, o.MaxFailedIndexes = "learn", 1, ptr[int32](2) }, "max failed indexes 2 > parallelism 1"},
		{"negative eval step", func(o *Options) { o.Stage, o.Parallelism, o.EvalStep = "evaluate", 1, ptr[int64](-1) }, "evaluation step -1 < 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.Stage = "rollout"
			tc.edit(&o)
			if _, err := StageJob(o); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestEvaluateJobPerStep: an evaluation of a given step (and split) is its own Job, named and
// run for that step, so applying the next one does not find the previous one "unchanged".
func TestEvaluateJobPerStep(t *testing.T) {
	for _, tc := range []struct {
		step     *int64
		train    bool
		wantName string
		wantArgs []string
	}{
		{nil, false, "drmas-demo-evaluate", nil},
		{ptr[int64](8), false, "drmas-demo-evaluate-step-8", []string{"--step", "8"}},
		{ptr[int64](0), true, "drmas-demo-evaluate-train-step-0", []string{"--step", "0", "--train-split"}},
		{nil, true, "drmas-demo-evaluate-train", []string{"--train-split"}},
	} {
		o := testOptions()
		o.Run, o.Stage, o.Parallelism, o.EvalStep, o.EvalTrainSplit = "demo", "evaluate", 1, tc.step, tc.train
		j, err := StageJob(o)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"run-stage", "evaluate"}, tc.wantArgs...)
		want = append(want, "--config", ConfigPath)
		if j.Name != tc.wantName || !reflect.DeepEqual(j.Spec.Template.Spec.Containers[0].Args, want) {
			t.Errorf("step %v train %v: Job %s args %q, want %s %q", tc.step, tc.train, j.Name, j.Spec.Template.Spec.Containers[0].Args, tc.wantName, want)
		}
	}
}

func TestNoSecret(t *testing.T) {
	o := testOptions()
	o.Stage, o.S3Secret = "normalize", ""
	j, err := StageJob(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "AWS_") {
			t.Fatalf("credential env without a Secret: %+v", e)
		}
	}
}

func resourceFromString(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
