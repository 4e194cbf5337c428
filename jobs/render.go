// Package jobs runs drmas stages as Kubernetes Indexed Jobs: the shard arithmetic a worker
// uses to pick its parts (Shard, ParseShard, ShardFromEnv) and the Job manifests that
// `drmas jobs render` prints, built from the typed k8s.io/api structs.
package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Labels set on every Job and its pods.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelRun       = "drmas/run"
	LabelStage     = "drmas/stage"
	LabelIteration = "drmas/iteration"
)

// Mount point of the config ConfigMap and the file the stages read.
const (
	ConfigDir  = "/etc/drmas"
	ConfigKey  = "config.yaml"
	ConfigPath = ConfigDir + "/" + ConfigKey
)

// Secret keys (and environment variable names) of the S3 credentials.
const (
	EnvAccessKey = "AWS_ACCESS_KEY_ID"
	EnvSecretKey = "AWS_SECRET_ACCESS_KEY"
)

// GPUResource is the extended resource of the NVIDIA device plugin.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// MaxNameLen bounds Job names. A Job name must be a valid label value (≤ 63: it becomes the
// batch.kubernetes.io/job-name label), and the pods of an Indexed Job get the hostname
// "<job>-<index>", also ≤ 63; 52 leaves room for any index.
const MaxNameLen = 52

// StageSpec describes how one stage runs as a Job.
type StageSpec struct {
	Name string
	// Iter: the stage takes --iter N (rollout, normalize, learn).
	Iter bool
	// Sharded: the stage splits its parts over --shard workers, so the Job may have
	// parallelism > 1. Others run as a single pod.
	Sharded bool
	// GPU: the stage runs a model (sampling or training) and gets --gpus-per-pod GPUs.
	GPU bool
}

// Stages lists the stages `drmas run-stage` knows, in pipeline order.
var Stages = []StageSpec{
	{Name: "warmup", GPU: true},
	{Name: "rollout", Iter: true, Sharded: true, GPU: true},
	{Name: "normalize", Iter: true, Sharded: true},
	{Name: "learn", Iter: true, GPU: true},
	{Name: "evaluate", GPU: true},
}

// IterationStages are the Jobs of one RL iteration, in the order they must run.
var IterationStages = []string{"rollout", "normalize", "learn"}

// LookupStage returns the spec of the named stage.
func LookupStage(name string) (StageSpec, error) {
	var names []string
	for _, s := range Stages {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return StageSpec{}, fmt.Errorf("unknown stage %q: want one of %s", name, strings.Join(names, ", "))
}

// Options configures the rendered Jobs. Zero fields take the defaults of DefaultOptions where
// noted.
type Options struct {
	Run       string // the run name (config key run); names and labels the Jobs
	Stage     string // for StageJob
	Iteration int    // for stages that take --iter; negative: none
	// Parallelism is the number of shards (completions = parallelism) of sharded stages;
	// default 1. Unsharded stages always get 1 in IterationJobs and reject more in StageJob.
	Parallelism     int
	Image           string            // default "drmas:latest"
	ImagePullPolicy corev1.PullPolicy // default IfNotPresent
	Namespace       string            // a DNS-1123 label; empty: kubectl's current namespace
	// S3Secret names a Secret with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, passed
	// to the container by secretKeyRef. Empty: no credentials env (e.g. workload identity).
	S3Secret string
	// ConfigMap names a ConfigMap with key config.yaml, mounted at /etc/drmas.
	ConfigMap string // default "drmas-config"
	// GPUsPerPod > 0 requests nvidia.com/gpu for stages that run a model.
	GPUsPerPod int
	CPU        string // CPU request, default "1"
	Memory     string // memory request, default "2Gi"
	// BackoffLimitPerIndex is the retries of each index (default 3); MaxFailedIndexes the
	// failed indexes tolerated before the Job fails (default 0: every part is needed).
	BackoffLimitPerIndex *int32
	MaxFailedIndexes     *int32
	// TTLSecondsAfterFinished, if set, lets Kubernetes delete finished Jobs.
	TTLSecondsAfterFinished *int32
	ServiceAccount          string
	// Suspend creates the Job suspended (resume with kubectl patch … suspend=false).
	Suspend bool
	// ConfigEnv sets DRMAS_* config overrides (configs.Overrides) in every pod, so that the
	// pods resolve the configuration the Jobs were rendered with: the ConfigMap's file plus
	// what flags and DRMAS_* variables set when rendering (--run, --store, --seed, …). Values
	// reach the pods verbatim: each '$' is rendered as "$$", which Kubernetes' $(VAR)
	// expansion of env values turns back into '$'.
	ConfigEnv map[string]string
	// EvalStep is the checkpoint step the evaluate Job measures (--step), and part of its
	// name, so that a Job per step can be applied and waited for; nil: the LATEST step when
	// the pod runs, under one fixed name (delete the finished Job before applying it again).
	EvalStep *int64
	// EvalTrainSplit makes the evaluate Job score training-split prompts (--train-split).
	EvalTrainSplit bool
}

// Defaults.
const (
	DefaultImage                = "drmas:latest"
	DefaultConfigMap            = "drmas-config"
	DefaultS3Secret             = "drmas-s3"
	DefaultCPU                  = "1"
	DefaultMemory               = "2Gi"
	DefaultBackoffLimitPerIndex = 3
)

func (o Options) withDefaults() Options {
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if o.ConfigMap == "" {
		o.ConfigMap = DefaultConfigMap
	}
	if o.CPU == "" {
		o.CPU = DefaultCPU
	}
	if o.Memory == "" {
		o.Memory = DefaultMemory
	}
	if o.BackoffLimitPerIndex == nil {
		o.BackoffLimitPerIndex = ptr[int32](DefaultBackoffLimitPerIndex)
	}
	if o.MaxFailedIndexes == nil {
		o.MaxFailedIndexes = ptr[int32](0)
	}
	return o
}

// StageJob builds the Indexed Job that runs o.Stage for o.Iteration on o.Parallelism pods.
func StageJob(o Options) (*batchv1.Job, error) {
	spec, err := LookupStage(o.Stage)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if !spec.Sharded && o.Parallelism != 1 {
		return nil, fmt.Errorf("stage %s is not sharded: it runs on one pod (parallelism 1, not %d)", spec.Name, o.Parallelism)
	}
	return build(spec, o)
}

// IterationJobs builds the Jobs of one RL iteration — rollout, normalize, learn — in the
// order they must run. Sharded stages get o.Parallelism pods, learn one. Unless o.Suspend
// is set, the first Job starts at once and the others are created suspended: apply them all,
// then resume each after the previous one completes (ChainScript prints the commands).
func IterationJobs(o Options) ([]*batchv1.Job, error) {
	o = o.withDefaults()
	var out []*batchv1.Job
	for i, name := range IterationStages {
		spec, err := LookupStage(name)
		if err != nil {
			return nil, err
		}
		so := o
		so.Stage = name
		so.Suspend = o.Suspend || i > 0
		if !spec.Sharded {
			so.Parallelism = 1
			// Kubernetes allows at most completions failed indexes; a one-pod stage has one.
			if *so.MaxFailedIndexes > 1 {
				so.MaxFailedIndexes = ptr[int32](1)
			}
		}
		j, err := build(spec, so)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func build(spec StageSpec, o Options) (*batchv1.Job, error) {
	if o.Parallelism < 1 || o.Parallelism > MaxShards {
		return nil, fmt.Errorf("parallelism %d out of range [1, %d]", o.Parallelism, MaxShards)
	}
	if spec.Iter && o.Iteration < 0 {
		return nil, fmt.Errorf("stage %s needs an iteration (--iter N, N ≥ 0)", spec.Name)
	}
	if o.GPUsPerPod < 0 {
		return nil, fmt.Errorf("gpus per pod %d < 0", o.GPUsPerPod)
	}
	if *o.BackoffLimitPerIndex < 0 || *o.MaxFailedIndexes < 0 {
		return nil, fmt.Errorf("backoff limit per index and max failed indexes must be ≥ 0")
	}
	if int(*o.MaxFailedIndexes) > o.Parallelism {
		// The API server refuses such a Job (maxFailedIndexes: up to completions).
		return nil, fmt.Errorf("max failed indexes %d > parallelism %d: at most one per shard", *o.MaxFailedIndexes, o.Parallelism)
	}
	switch o.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, fmt.Errorf("image pull policy %q: want Always, IfNotPresent or Never", o.ImagePullPolicy)
	}
	if o.TTLSecondsAfterFinished != nil && *o.TTLSecondsAfterFinished < 0 {
		return nil, fmt.Errorf("ttl seconds after finished %d < 0", *o.TTLSecondsAfterFinished)
	}
	if o.Namespace != "" && len(validation.IsDNS1123Label(o.Namespace)) > 0 {
		return nil, fmt.Errorf("namespace %q: want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", o.Namespace)
	}
	cpu, err := resource.ParseQuantity(o.CPU)
	if err != nil {
		return nil, fmt.Errorf("cpu request %q: %w", o.CPU, err)
	}
	mem, err := resource.ParseQuantity(o.Memory)
	if err != nil {
		return nil, fmt.Errorf("memory request %q: %w", o.Memory, err)
	}
	isEval := spec.Name == "evaluate"
	if !isEval && (o.EvalStep != nil || o.EvalTrainSplit) {
		return nil, fmt.Errorf("stage %s takes no evaluation step or split", spec.Name)
	}
	if o.EvalStep != nil && *o.EvalStep < 0 {
		return nil, fmt.Errorf("evaluation step %d < 0 (leave it unset for LATEST)", *o.EvalStep)
	}
	iter := -1
	if spec.Iter {
		iter = o.Iteration
	}
	nameStage, nameNum := spec.Name, iter
	if isEval {
		if o.EvalTrainSplit {
			nameStage = "evaluate-train"
		}
		if o.EvalStep != nil {
			nameStage += "-step"
			nameNum = int(*o.EvalStep)
		}
	}
	name := Name(o.Run, nameStage, nameNum)
	labels := map[string]string{
		LabelName:  "drmas",
		LabelRun:   LabelValue(o.Run),
		LabelStage: spec.Name,
	}
	args := []string{"run-stage", spec.Name}
	if iter >= 0 {
		labels[LabelIteration] = strconv.Itoa(iter)
		args = append(args, "--iter", strconv.Itoa(iter))
	}
	if o.EvalStep != nil {
		args = append(args, "--step", strconv.FormatInt(*o.EvalStep, 10))
	}
	if o.EvalTrainSplit {
		args = append(args, "--train-split")
	}
	args = append(args, "--config", ConfigPath)

	env := []corev1.EnvVar{{Name: EnvShardCount, Value: strconv.Itoa(o.Parallelism)}}
	for _, k := range slices.Sorted(maps.Keys(o.ConfigEnv)) {
		if !strings.HasPrefix(k, "DRMAS_") || k == EnvShardCount {
			return nil, fmt.Errorf("config env %s: want a DRMAS_* config variable", k)
		}
		env = append(env, corev1.EnvVar{Name: k, Value: escapeExpansion(o.ConfigEnv[k])})
	}
	if o.S3Secret != "" {
		for _, k := range []string{EnvAccessKey, EnvSecretKey} {
			env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: o.S3Secret},
					Key:                  k,
				},
			}})
		}
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
	}
	var tolerations []corev1.Toleration
	if spec.GPU && o.GPUsPerPod > 0 {
		res.Limits = corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(o.GPUsPerPod), resource.DecimalSI)}
		// GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule.
		tolerations = []corev1.Toleration{{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	var suspend *bool
	if o.Suspend {
		suspend = ptr(true)
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode:          ptr(batchv1.IndexedCompletion),
			Completions:             ptr(int32(o.Parallelism)),
			Parallelism:             ptr(int32(o.Parallelism)),
			BackoffLimitPerIndex:    o.BackoffLimitPerIndex,
			MaxFailedIndexes:        o.MaxFailedIndexes,
			PodReplacementPolicy:    ptr(batchv1.Failed),
			TTLSecondsAfterFinished: o.TTLSecondsAfterFinished,
			Suspend:                 suspend,
			// Evictions and preemptions (DisruptionTarget) do not use up an index's retries.
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: clone(labels)},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: o.ServiceAccount,
					Tolerations:        tolerations,
					Containers: []corev1.Container{{
						Name:            "drmas",
						Image:           o.Image,
						ImagePullPolicy: o.ImagePullPolicy,
						Command:         []string{"drmas"},
						Args:            args,
						Env:             env,
						Resources:       res,
						VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: ConfigDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name: "config",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap},
							Items:                []corev1.KeyToPath{{Key: ConfigKey, Path: ConfigKey}},
						}},
					}},
				},
			},
		},
	}
	return job, nil
}

// escapeExpansion escapes v for an EnvVar value, which Kubernetes expands before the container
// starts: "$(NAME)" becomes the value of an earlier variable NAME and "$$" becomes "$". With
// every '$' doubled, the expansion yields v itself.
func escapeExpansion(v string) string { return strings.ReplaceAll(v, "$", "$$") }

// Name is the Job name of stage for run and iteration (negative: none):
// drmas-<run>-<stage>[-<iter>], lowercased, with characters outside [a-z0-9-] replaced by
// '-'. When too long for MaxNameLen the run part is shortened and followed by a hash of the
// full run name, so distinct runs keep distinct names.
func Name(run, stage string, iter int) string {
	suffix := "-" + dns(stage)
	if iter >= 0 {
		suffix += "-" + strconv.Itoa(iter)
	}
	const prefix = "drmas-"
	r := dns(run)
	if r == "" {
		r = "run"
	}
	if len(prefix)+len(r)+len(suffix) > MaxNameLen {
		h := shortHash(run)
		keep := max(MaxNameLen-len(prefix)-len(suffix)-len(h)-1, 0)
		r = strings.Trim(r[:min(keep, len(r))], "-")
		if r == "" {
			r = h
		} else {
			r += "-" + h
		}
	}
	return prefix + r + suffix
}

// LabelValue turns s into a valid label value: at most 63 characters from [A-Za-z0-9-_.],
// beginning and ending with an alphanumeric; others become '-'. Long values are shortened and
// end with a hash of s.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(isAlnum(c) || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	v := trimNonAlnum(string(b))
	if len(v) > 63 {
		v = trimNonAlnum(v[:63-7]) + "-" + shortHash(s)
	}
	return v
}

func dns(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range []byte(strings.ToLower(s)) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteByte(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func trimNonAlnum(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r > 127 || !isAlnum(byte(r)) })
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:3])
}

func ptr[T any](v T) *T { return &v }

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// MarshalJob encodes one Job as YAML with the API's field names (sigs.k8s.io/yaml), without
// the empty status.
func MarshalJob(j *batchv1.Job) ([]byte, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.Name, err)
	}
	delete(m, "status")
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.Name, err)
	}
	return out, nil
}

// Write prints jobs as a multi-document YAML stream, after header (each line is written as a
// YAML comment; empty: none).
func Write(w io.Writer, header string, jobs ...*batchv1.Job) error {
	var buf bytes.Buffer
	if header != "" {
		for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			buf.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	for _, j := range jobs {
		data, err := MarshalJob(j)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ChainScript is the shell that runs jobs (as IterationJobs returns them: the first running,
// the rest suspended) one after another once applied: wait for each to complete, fail fast if
// it fails, then resume the next.
func ChainScript(namespace string, jobs ...*batchv1.Job) string {
	ns := ""
	if namespace != "" {
		ns = " -n " + namespace
	}
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			fmt.Fprintf(&b, "kubectl%s patch job %s --type=merge -p '{\"spec\":{\"suspend\":false}}'\n", ns, j.Name)
		}
		fmt.Fprintf(&b, "drmas_wait%s %s\n", ns, j.Name)
	}
	return b.String()
}

// IterationHeader is the comment printed above the YAML of IterationJobs: what the Jobs
// are and how to run them in order.
func IterationHeader(namespace string, jobs ...*batchv1.Job) string {
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "drmas: %s, one after another.\n", strings.Join(names, " → "))
	b.WriteString("Only the first Job starts when applied; the others are created suspended. After\n")
	b.WriteString("`kubectl apply -f` this file, run (bash; or render with --script for a ready script):\n\n")
	b.WriteString(WaitFunc + "\n")
	b.WriteString(ChainScript(namespace, jobs...))
	return b.String()
}

// IterationScript is a bash script that applies jobs (as IterationJobs returns them) and runs
// them in order, exiting non-zero when one fails.
func IterationScript(namespace string, jobs ...*batchv1.Job) (string, error) {
	var y bytes.Buffer
	if err := Write(&y, "", jobs...); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n# Generated by drmas jobs render --script.\nset -euo pipefail\n\n")
	b.WriteString(WaitFunc + "\n\n")
	b.WriteString("kubectl apply -f - <<'DRMAS_JOBS'\n")
	b.Write(y.Bytes())
	b.WriteString("DRMAS_JOBS\n")
	b.WriteString(ChainScript(namespace, jobs...))
	return b.String(), nil
}

// WaitFunc is a shell function, used by ChainScript, that waits until a Job completes and
// returns non-zero as soon as it fails.
const WaitFunc = `drmas_wait() {  # [-n NS] JOB: wait for Complete, stop early on Failed
  while :; do
    s=$(kubectl get job "$@" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}')
    case " $s " in
      *" Complete "*) return 0 ;;
      *" Failed "*) echo "job $*: failed" >&2; return 1 ;;
    esac
    sleep 10
  done
}`
