package jobs

import (
	"strings"
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

// expandEnv is Kubernetes' expansion of an EnvVar value (k8s.io/kubernetes
// third_party/forked/golang/expansion, as documented on corev1.EnvVar.Value): "$(NAME)" is
// replaced by the value of an earlier variable NAME (left as is when there is none), "$$"
// becomes "$", and any other '$' stays.
func expandEnv(in string, earlier map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 == len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := in[i+2 : i+2+end]
			if v, ok := earlier[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// TestConfigEnvSurvivesExpansion: Kubernetes expands $(VAR) and $$ in env values, so the
// rendered values are escaped and the pods see exactly what was set when rendering.
func TestConfigEnvSurvivesExpansion(t *testing.T) {
	values := []string{"plain", "s3://b/pre$$fix", "$(DRMAS_SHARD_COUNT)", "$$(DRMAS_SHARD_COUNT)", "$", "a$", "$(", "cost$5 $(UNSET) $$$", "quote\"'\nnewline"}
	for _, v := range values {
		o := testOptions()
		o.Stage = "rollout"
		o.ConfigEnv = map[string]string{"DRMAS_RUN": "x", "DRMAS_STORE": v}
		j, err := StageJob(o)
		if err != nil {
			t.Fatal(err)
		}
		// Decode the printed YAML, then expand as the kubelet does.
		back := decode(t, roundTrip(t, "", j))[0]
		earlier := map[string]string{}
		got := ""
		for _, e := range back.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom != nil {
				continue
			}
			x := expandEnv(e.Value, earlier)
			earlier[e.Name] = x
			if e.Name == "DRMAS_STORE" {
				got = x
			}
		}
		if got != v {
			t.Errorf("DRMAS_STORE=%q reaches the pod as %q", v, got)
		}
	}
}
