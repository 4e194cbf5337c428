package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/jobs"
)

func newJobsCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "jobs",
		Short: "Run stages on Kubernetes: render Indexed Job manifests",
	})
	cmd.AddCommand(newJobsRenderCmd())
	return cmd
}

func newJobsRenderCmd() *cobra.Command {
	var (
		o                       jobs.Options
		iteration               int
		backoff, maxFailed, ttl int32
		script                  bool
		evalStep                int64
	)
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print Kubernetes Job manifests (YAML) for one stage or a whole iteration",
		Long: `Prints Indexed Jobs (completionMode: Indexed, completions = parallelism = --parallelism) that
run 'drmas run-stage STAGE --iter N --config /etc/drmas/config.yaml' in the given image. Each
pod is one shard: Kubernetes sets JOB_COMPLETION_INDEX, the Job sets DRMAS_SHARD_COUNT, and the
stage processes only the parts its shard owns. rollout and normalize are sharded; warmup, learn
and evaluate run on one pod.

The pods read their configuration from the ConfigMap --config-map (key config.yaml) and the S3
credentials AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the Secret --s3-secret (by
secretKeyRef; never inline). Render with the same --config as the ConfigMap holds: the run name
labels and names the Jobs. What --run, --store, --seed and DRMAS_* variables set when rendering
is passed to the pods as DRMAS_* variables in the Job, so the pods run the configuration the
Jobs are named after (S3 keys excepted: those come from the Secret).

  --stage S --iter N     one Job
  --stage evaluate [--step N] [--train-split]
                         the evaluation of checkpoint step N (default: LATEST when the pod
                         runs), named drmas-RUN-evaluate[-train][-step-N]: one Job per step
  --iteration N          rollout, normalize and learn of iteration N, in order; only the first
                         starts when applied, the others are created suspended. The YAML's
                         header shows the commands that resume each after the previous one
                         completes; --script prints a bash script that applies and chains them:

    set -o pipefail   # or a render that fails (a config error) pipes nothing to a bash that succeeds
    for i in $(seq 0 9); do
      drmas jobs render --config cfg.yaml --iteration $i --parallelism 4 --script | bash || break
    done`,
		Example: `  drmas jobs render --config cfg.yaml --stage rollout --iter 7 --parallelism 4 --gpus-per-pod 1 | kubectl apply -f -
  drmas jobs render --config cfg.yaml --iteration 7 --parallelism 4 > iter-7.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			whole, single := f.Changed("iteration"), f.Changed("stage")
			switch {
			case whole == single:
				return fmt.Errorf("give either --stage S (with --iter N) or --iteration N")
			case whole && f.Changed("iter"):
				return fmt.Errorf("--iter goes with --stage; --iteration N already names the iteration")
			case single && script:
				return fmt.Errorf("--script goes with --iteration")
			case whole:
				if err := checkIter("iteration", iteration); err != nil {
					return err
				}
			case f.Changed("iter"):
				if err := checkIter("iter", o.Iteration); err != nil {
					return err
				}
			}
			if o.Parallelism < 1 || o.Parallelism > jobs.MaxShards {
				return fmt.Errorf("--parallelism %d: must be in [1, %d]", o.Parallelism, jobs.MaxShards)
			}
			if f.Changed("step") || f.Changed("train-split") {
				if o.Stage != "evaluate" {
					return fmt.Errorf("--step and --train-split go with --stage evaluate")
				}
				if f.Changed("step") {
					if evalStep < 0 {
						return fmt.Errorf("--step %d: must be ≥ 0 (leave it out for LATEST)", evalStep)
					}
					o.EvalStep = &evalStep
				}
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl-seconds %d: must be ≥ 0 (0: keep finished Jobs)", ttl)
			}
			lo := loadOptions(cmd)
			cfg, err := loadInterruptibly(cmd.Context(), lo)
			if err != nil {
				return err
			}
			// The pods get what flags and DRMAS_* set here, so they run what the Jobs are named after.
			o.Run, o.ConfigEnv = cfg.Run, configs.Overrides(lo)
			o.BackoffLimitPerIndex, o.MaxFailedIndexes = &backoff, &maxFailed
			if ttl > 0 {
				o.TTLSecondsAfterFinished = &ttl
			}
			if !strings.HasPrefix(cfg.Store, "s3://") {
				fmt.Fprintf(cmd.ErrOrStderr(), "drmas: warning: store %q is not s3://: pods on different nodes will not share it\n", cfg.Store)
			}
			if cfg.S3.AccessKey != "" || cfg.S3.SecretKey != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "drmas: warning: the config holds S3 keys: keep them out of the ConfigMap (jobs render does not pass them to the pods) and in the Secret --s3-secret")
			}
			out := cmd.OutOrStdout()
			if single {
				if spec, err := jobs.LookupStage(o.Stage); err == nil && spec.Iter && !f.Changed("iter") {
					return fmt.Errorf("stage %s needs --iter N", o.Stage)
				}
				if spec, err := jobs.LookupStage(o.Stage); err == nil && !spec.Iter && f.Changed("iter") {
					return fmt.Errorf("stage %s takes no --iter", o.Stage)
				}
				j, err := jobs.StageJob(o)
				if err != nil {
					return err
				}
				return jobs.Write(out, "", j)
			}
			o.Iteration = iteration
			js, err := jobs.IterationJobs(o)
			if err != nil {
				return err
			}
			if script {
				s, err := jobs.IterationScript(o.Namespace, js...)
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(out, s)
				return err
			}
			return jobs.Write(out, jobs.IterationHeader(o.Namespace, js...), js...)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Stage, "stage", "", "stage: warmup, rollout, normalize, learn or evaluate")
	f.IntVar(&o.Iteration, "iter", 0, "iteration of --stage (rollout, normalize, learn)")
	f.IntVar(&iteration, "iteration", 0, "render a whole iteration: rollout, normalize, learn")
	f.IntVar(&o.Parallelism, "parallelism", 1, "pods (= shards) of sharded stages, ≥ 1")
	f.StringVar(&o.Image, "image", jobs.DefaultImage, "container image with the drmas binary on PATH")
	f.StringVar((*string)(&o.ImagePullPolicy), "image-pull-policy", "IfNotPresent", "Always, IfNotPresent or Never")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the Jobs, a DNS-1123 label (default: kubectl's current)")
	f.StringVar(&o.S3Secret, "s3-secret", jobs.DefaultS3Secret, "Secret with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (empty: no credentials env)")
	f.StringVar(&o.ConfigMap, "config-map", jobs.DefaultConfigMap, "ConfigMap with key config.yaml, mounted at /etc/drmas")
	f.IntVar(&o.GPUsPerPod, "gpus-per-pod", 0, "nvidia.com/gpu limit of the stages that run a model (rollout, learn, warmup, evaluate)")
	f.StringVar(&o.CPU, "cpu", jobs.DefaultCPU, "CPU request per pod")
	f.StringVar(&o.Memory, "memory", jobs.DefaultMemory, "memory request per pod")
	f.Int32Var(&backoff, "backoff-limit-per-index", jobs.DefaultBackoffLimitPerIndex, "retries of each shard")
	f.Int32Var(&maxFailed, "max-failed-indexes", 0, "failed shards tolerated before the Job fails (0: every part is needed)")
	f.Int32Var(&ttl, "ttl-seconds", 0, "delete finished Jobs after this many seconds, ≥ 0 (0: keep)")
	f.StringVar(&o.ServiceAccount, "service-account", "", "pod service account (e.g. for workload identity)")
	f.BoolVar(&o.Suspend, "suspend", false, "create the Job(s) suspended")
	f.Int64Var(&evalStep, "step", 0, "with --stage evaluate: the checkpoint step to evaluate (default: LATEST when the pod runs)")
	f.BoolVar(&o.EvalTrainSplit, "train-split", false, "with --stage evaluate: score training-split prompts (in-distribution)")
	f.BoolVar(&script, "script", false, "with --iteration: print a bash script that applies the Jobs and runs them in order")
	return cmd
}
