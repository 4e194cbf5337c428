package main

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/drmas-dev/drmas/configs"
)

// renderJob runs jobs render for one stage and decodes the Job.
func renderJob(t *testing.T, args ...string) (*batchv1.Job, string) {
	t.Helper()
	out, errOut, err := execute(t, append([]string{"jobs", "render", "--stage", "rollout", "--iter", "2"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(out, "---\n")), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return &j, errOut
}

func TestJobsRenderPassesOverridesToPods(t *testing.T) {
	t.Setenv("DRMAS_LEARN_LR", "0.5")
	t.Setenv("DRMAS_S3_SECRET_KEY", "very-secret-value")
	j, errOut := renderJob(t, "--run", "exp2", "--store", "s3://bucket/prefix", "--seed", "9")
	if j.Name != "drmas-exp2-rollout-2" {
		t.Fatalf("job name %s", j.Name)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{"DRMAS_RUN": "exp2", "DRMAS_STORE": "s3://bucket/prefix", "DRMAS_SEED": "9", "DRMAS_LEARN_LR": "0.5"} {
		if env[k] != want {
			t.Errorf("pod env %s=%q, want %q (env %v)", k, env[k], want, env)
		}
	}
	if _, ok := env["DRMAS_S3_SECRET_KEY"]; ok {
		t.Errorf("an S3 key was inlined in the Job: %v", env)
	}
	if strings.Contains(errOut, "is not s3://") {
		t.Errorf("warned about the store although the pods use s3://: %s", errOut)
	}
	// A pod loading the same file (here the default) with that env resolves what names the Job.
	cfg, err := configs.Load(configs.LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Run != "exp2" || cfg.Store != "s3://bucket/prefix" || cfg.Seed != 9 || cfg.Learn.LR != 0.5 {
		t.Fatalf("the pods would resolve run=%s store=%s seed=%d lr=%g", cfg.Run, cfg.Store, cfg.Seed, cfg.Learn.LR)
	}
}

func TestJobsRenderWarnsAboutThePodsStore(t *testing.T) {
	t.Setenv("DRMAS_STORE", "s3://from-env/p")
	_, errOut := renderJob(t, "--store", "/local/folder")
	if !strings.Contains(errOut, `store "/local/folder" is not s3://`) {
		t.Fatalf("want a warning about the flag's store, got %q", errOut)
	}
}

func TestJobsRenderRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--image-pull-policy", "Sometimes", `image pull policy "Sometimes": want Always, IfNotPresent or Never`},
		{"--ttl-seconds", "-5", "--ttl-seconds -5: must be ≥ 0"},
		{"--parallelism", "0", "--parallelism 0: must be in [1, "},
		{"--parallelism", "-3", "--parallelism -3: must be in [1, "},
		{"--namespace", "Bad_NS", `namespace "Bad_NS": want at most 63 lowercase letters`},
	} {
		for _, mode := range [][]string{{"--stage", "rollout", "--iter", "0"}, {"--iteration", "0"}} {
			args := append([]string{"--store", "s3://bucket/prefix", "jobs", "render", tc.flag, tc.value}, mode...)
			out, _, err := execute(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s %v: want an error with %q, got %v", tc.flag, tc.value, mode, tc.want, err)
			}
			if out != "" {
				t.Errorf("%s %s: printed manifests:\n%s", tc.flag, tc.value, out)
			}
		}
	}
}

func TestJobsRenderEvaluateStep(t *testing.T) {
	out, _, err := execute(t, "--store", "s3://b/p", "--run", "exp", "jobs", "render", "--stage", "evaluate", "--step", "8", "--train-split")
	if err != nil {
		t.Fatal(err)
	}
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(out, "---\n")), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	args := strings.Join(j.Spec.Template.Spec.Containers[0].Args, " ")
	if j.Name != "drmas-exp-evaluate-train-step-8" || !strings.Contains(args, "run-stage evaluate --step 8 --train-split") {
		t.Fatalf("Job %s runs %q", j.Name, args)
	}
	for _, tc := range [][]string{
		{"--stage", "rollout", "--iter", "0", "--step", "3"},
		{"--iteration", "0", "--train-split"},
		{"--stage", "evaluate", "--step", "-1"},
	} {
		out, _, err := execute(t, append([]string{"--store", "s3://b/p", "jobs", "render"}, tc...)...)
		if err == nil || out != "" {
			t.Errorf("%q: err %v, printed %q", tc, err, out)
		}
	}
}
