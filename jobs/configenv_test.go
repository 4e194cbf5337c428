package jobs

import (
	"testing"
)

func TestConfigEnvInPods(t *testing.T) {
	o := testOptions()
	o.ConfigEnv = map[string]string{"DRMAS_STORE": "s3://b/p", "DRMAS_RUN": "exp2"}
	js, err := IterationJobs(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		var names []string
		env := map[string]string{}
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			names = append(names, e.Name)
			env[e.Name] = e.Value
		}
		if env["DRMAS_RUN"] != "exp2" || env["DRMAS_STORE"] != "s3://b/p" {
			t.Errorf("%s: env %v lacks the config overrides", j.Name, env)
		}
		// Sorted after the shard count, so that manifests are stable.
		if len(names) < 3 || names[0] != EnvShardCount || names[1] != "DRMAS_RUN" || names[2] != "DRMAS_STORE" {
			t.Errorf("%s: env order %v", j.Name, names)
		}
	}
}
