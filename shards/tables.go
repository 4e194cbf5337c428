package shards

// The tables below are what the stages persist besides trajectories and advantages. They live
// here, beside Row and AdvantageRow, so that a reader of stored files (analysis, report) needs
// this package only, never the stage that wrote them.
//
// The Go type name is the Parquet schema's root name, written into every file: renaming one of
// these types changes the stored bytes. Column order follows field order.

// DiagnosticsRow is one row of diagnostics/est=<name>/agents.parquet: the Lemma 4.2 statistics of
// one agent over the iteration's groups (estimators.AgentDiagnostics), and the estimator's
// advantage statistics for it: AdvMean, AdvAbsMean and AdvStd are the mean, the mean absolute
// value and the population standard deviation (divided by n) of the agent's stored (float32)
// advantages.
type DiagnosticsRow struct {
	Iteration       int32   `parquet:"iteration"`
	Estimator       string  `parquet:"estimator,dict"`
	Agent           string  `parquet:"agent,dict"`
	Rows            int64   `parquet:"rows"`
	Groups          int64   `parquet:"groups"`
	SingletonGroups int64   `parquet:"singleton_groups"`
	MuK             float64 `parquet:"mu_k"`
	SigmaK          float64 `parquet:"sigma_k"`
	Mu              float64 `parquet:"mu"`
	Sigma           float64 `parquet:"sigma"`
	ZeroSigmaKShare float64 `parquet:"zero_sigma_k_share"`
	InflationMean   float64 `parquet:"inflation_mean"`
	InflationMax    float64 `parquet:"inflation_max"`
	InflationGroups int64   `parquet:"inflation_groups"`
	ZeroSigmaGroups int64   `parquet:"zero_sigma_groups"`
	AdvMean         float64 `parquet:"adv_mean"`
	AdvAbsMean      float64 `parquet:"adv_abs_mean"`
	AdvStd          float64 `parquet:"adv_std"`
}

// MetricsRow is one row of iter=N/learn/metrics.parquet. Agent "*" is the whole model. An
// agent's Loss and GradNorm are of its share of each mini-batch's token-mean loss (the sum over
// its tokens divided by all the mini-batch's tokens), so the agents' losses add up to the
// model's; the per-token figures (ClipFrac, ApproxKL, RefKL, Entropy, MeanAbsAdv) are means
// over the response tokens seen in all updates. ClipFrac counts the tokens whose clipped term
// the loss took (no gradient); Entropy is at the sampling temperature; MeanAbsAdv is the mean
// |advantage|.
type MetricsRow struct {
	Iteration    int32   `parquet:"iteration"`
	Estimator    string  `parquet:"estimator,dict"`
	Model        string  `parquet:"model,dict"`
	Agent        string  `parquet:"agent,dict"`
	Step         int64   `parquet:"step"`   // the checkpoint step published
	Rows         int64   `parquet:"rows"`   // distinct rows trained on (each epoch sees them again)
	Tokens       int64   `parquet:"tokens"` // their response tokens, counted once
	Updates      int32   `parquet:"updates"`
	Loss         float64 `parquet:"loss"`      // mean over updates
	GradNorm     float64 `parquet:"grad_norm"` // before clipping, mean over updates
	GradNormMax  float64 `parquet:"grad_norm_max"`
	ClipFrac     float64 `parquet:"clip_frac"`
	ApproxKL     float64 `parquet:"approx_kl"` // ½·mean(log ratio²)
	RefKL        float64 `parquet:"ref_kl"`    // mean k3 KL to the reference (kl_coef > 0)
	Entropy      float64 `parquet:"entropy"`
	MeanAbsAdv   float64 `parquet:"mean_abs_adv"`
	RatioMax     float64 `parquet:"ratio_max"`
	BehaviourGap float64 `parquet:"behaviour_gap"` // mean |stored − recomputed| log-prob
	// GPU telemetry (NVML) sampled after the model's updates, the most loaded device: bytes in
	// use and utilisation in percent. 0 on a machine without a GPU (CPU engine), so CPU runs stay
	// byte-identical; on a GPU machine these two columns are measurements, not deterministic.
	GPUMemoryUsed  int64 `parquet:"gpu_memory_used"`
	GPUUtilization int32 `parquet:"gpu_utilization"`
	// The learner objective's statistics (docs/objectives.md), optional so that metrics written
	// before them still read: shares of tokens clipped below 1−ε_low and above 1+ε_high and
	// bounded by the dual clip; the rollout correction's weight π_old/π_sampler before capping,
	// mean and max per unit, and the share capped or masked (null with learn.rollout_is none);
	// the share of rows whose advantage group had zero score spread (no signal); and the rows'
	// response lengths.
	ClipFracLow     *float64 `parquet:"clip_frac_low,optional"`
	ClipFracHigh    *float64 `parquet:"clip_frac_high,optional"`
	DualClipFrac    *float64 `parquet:"dual_clip_frac,optional"`
	RolloutISMean   *float64 `parquet:"rollout_is_mean,optional"`
	RolloutISMax    *float64 `parquet:"rollout_is_max,optional"`
	RolloutISCapped *float64 `parquet:"rollout_is_capped,optional"`
	ZeroStdShare    *float64 `parquet:"zero_std_share,optional"`
	ResponseLenMean *float64 `parquet:"response_len_mean,optional"`
	ResponseLenMax  *int64   `parquet:"response_len_max,optional"`
}

// ResultRow is one row of eval/step=N/results.parquet. DataSource "all" aggregates every
// prompt. AvgAtK is the mean over prompts of the share of their K samples that succeeded
// (reward > 0.5); PassAtK is the share of prompts with at least one success among their K
// samples: with exactly K samples per prompt this equals the unbiased estimator of Chen et al.
// (2021), 1 − C(n−c, k)/C(n, k) (workflows.PassAtK).
type ResultRow struct {
	Step       int64   `parquet:"step"`
	Workflow   string  `parquet:"workflow,dict"`
	DataSource string  `parquet:"data_source,dict"`
	K          int32   `parquet:"k"`
	Prompts    int32   `parquet:"prompts"`
	AvgAtK     float64 `parquet:"avg_at_k"`
	PassAtK    float64 `parquet:"pass_at_k"`
	// F1Mean is the mean token F1 of the answers (workflows.F1Scorer: the search workflow's)
	// over the data source's prompts, each prompt's F1 the mean over its k samples; null for a
	// workflow without F1 (math) and in files written before the column existed.
	F1Mean *float64 `parquet:"f1_mean,optional"`
	// VerifierAcceptCorrect and VerifierAcceptWrong are the shares of the verifier's verdicts on
	// correct (wrong) candidates that approved them (workflows.Verdict), over the data source's
	// verifier turns; null for a workflow without a verifier, where no such candidate was judged,
	// and in files written before the columns existed.
	VerifierAcceptCorrect *float64 `parquet:"verifier_accept_correct,optional"`
	VerifierAcceptWrong   *float64 `parquet:"verifier_accept_wrong,optional"`
}

// PromptRow is one row of eval/step=N/prompts.parquet: how many of one prompt's k samples
// succeeded. Two steps of a run are evaluated on the same prompts (tasks and their ids derive
// from the run seed), so their rows pair up by task_id: the paired change in avg@k has a far
// smaller standard error than the difference of two averages (analysis report "evaldelta").
type PromptRow struct {
	Step       int64  `parquet:"step"`
	Split      string `parquet:"split,dict"` // "eval" (held out) or "train" (Options.Train)
	DataSource string `parquet:"data_source,dict"`
	TaskID     string `parquet:"task_id"`
	Question   string `parquet:"question"`
	K          int32  `parquet:"k"`
	Successes  int32  `parquet:"successes"`
	// F1Mean is the mean token F1 of the prompt's k answers; null as in ResultRow.F1Mean.
	F1Mean *float64 `parquet:"f1_mean,optional"`
}

// SummaryRow is one row of runs/<src>/ablations/<mode>/summary.parquet: what one estimator (and
// seed) did at one iteration for one agent. Agent "*" is the whole model.
type SummaryRow struct {
	Mode      string `parquet:"mode,dict"`
	Estimator string `parquet:"estimator,dict"`
	Seed      uint64 `parquet:"seed"`
	Run       string `parquet:"run,dict"` // the run holding the outputs
	Iteration int32  `parquet:"iteration"`
	Model     string `parquet:"model,dict"`
	Agent     string `parquet:"agent,dict"`
	// Step is the checkpoint the learner published from this iteration.
	Step        int64   `parquet:"step"`
	Loss        float64 `parquet:"loss"`
	GradNorm    float64 `parquet:"grad_norm"` // before clipping, mean over updates
	GradNormMax float64 `parquet:"grad_norm_max"`
	ClipFrac    float64 `parquet:"clip_frac"`
	MeanAbsAdv  float64 `parquet:"mean_abs_adv"`
	// Rows and Reward describe the rollout the learner trained on: the agent's rows and their
	// mean score.
	Rows   int64   `parquet:"rows"`
	Reward float64 `parquet:"reward"`
	// EvalK, AvgAtK, PassAtK are the evaluation (data source "all") of Step, where one exists.
	EvalK   *int32   `parquet:"eval_k,optional"`
	AvgAtK  *float64 `parquet:"avg_at_k,optional"`
	PassAtK *float64 `parquet:"pass_at_k,optional"`
}

// EvalResultsFile and EvalPromptsFile are the files of a committed evaluation folder
// (eval/step=N or eval-train/step=N): ResultRow and PromptRow.
const (
	EvalResultsFile = "results.parquet"
	EvalPromptsFile = "prompts.parquet"
)
