package ablate

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
