package analysis

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ReportParams tune the canned reports. Zero values take the defaults; a negative or
// non-finite value is an error.
type ReportParams struct {
	// SpikeK: an update is a grad-norm spike when its grad norm exceeds SpikeK × the rolling
	// median of the agent's previous Window updates (gradnorm). Default 2.
	SpikeK float64
	// Window is the rolling-median window, in updates (iterations). Default 5.
	Window int
}

// validate rejects what the SQL cannot express: SpikeK is formatted into it with %g, where NaN
// and ±Inf are not numbers but column names.
func (p ReportParams) validate() error {
	if math.IsNaN(p.SpikeK) || math.IsInf(p.SpikeK, 0) || p.SpikeK < 0 {
		return fmt.Errorf("spike threshold k = %g: want a finite number > 0 (default 2)", p.SpikeK)
	}
	if p.Window < 0 {
		return fmt.Errorf("rolling-median window = %d: want a number of iterations > 0 (default 5)", p.Window)
	}
	return nil
}

func (p ReportParams) withDefaults() ReportParams {
	if p.SpikeK <= 0 {
		p.SpikeK = 2
	}
	if p.Window <= 0 {
		p.Window = 5
	}
	return p
}

// report is one canned report.
type report struct {
	help  string
	views []string // must be non-empty
	sql   func(ReportParams) string
}

// reports are the canned reports. Their float aggregates (avg, stddev_samp) order their input
// (avg(x ORDER BY row_id)): DuckDB adds a parallel aggregate's partial sums in the order its
// threads finish, so an unordered one may differ in its last digits from run to run.
var reports = map[string]report{
	"rewards": {
		help:  "reward distribution per agent per iteration: rows, mean and p10/p50/p90 of score and episode_reward",
		views: []string{"rollouts"},
		sql: func(ReportParams) string {
			return `SELECT iteration, agent, count(*) AS rows,
  avg(score ORDER BY row_id) AS score_mean, quantile_cont(score, 0.1) AS score_p10, quantile_cont(score, 0.5) AS score_p50, quantile_cont(score, 0.9) AS score_p90,
  avg(episode_reward ORDER BY row_id) AS reward_mean, quantile_cont(episode_reward, 0.1) AS reward_p10, quantile_cont(episode_reward, 0.5) AS reward_p50, quantile_cont(episode_reward, 0.9) AS reward_p90,
  avg(CASE WHEN valid THEN 1 ELSE 0 END) AS valid_share
FROM rollouts GROUP BY iteration, agent ORDER BY iteration, agent`
		},
	},
	"inflation": {
		help:  "inflation factor (σ_k² + (μ_k − μ)²)/σ² per agent per iteration per estimator (Lemma 4.2): mean, p90 (over groups, from the rollouts) and max, with μ_k, σ_k, μ, σ",
		views: []string{"diagnostics", "rollouts"},
		sql:   inflationSQL,
	},
	"gradnorm": {
		help:  "grad-norm spikes per agent: max/median of the per-iteration grad norm and the updates above k × the rolling median of the previous updates (iterations where the agent had rows: one without, whose grad norm is 0, is no update)",
		views: []string{"metrics"},
		sql: func(p ReportParams) string {
			return fmt.Sprintf(`WITH g AS (
  SELECT estimator, model, agent, iteration, grad_norm, grad_norm_max,
    median(grad_norm) OVER (PARTITION BY estimator, model, agent ORDER BY iteration ROWS BETWEEN %d PRECEDING AND 1 PRECEDING) AS rolling_median
  FROM metrics WHERE rows > 0
)
SELECT estimator, model, agent, count(*) AS updates,
  max(grad_norm) AS grad_norm_max, median(grad_norm) AS grad_norm_median, max(grad_norm) / nullif(median(grad_norm), 0) AS max_over_median,
  max(grad_norm_max) AS peak_minibatch_grad_norm,
  count(*) FILTER (WHERE grad_norm > %g * rolling_median) AS spikes,
  coalesce(string_agg(CAST(iteration AS VARCHAR), ',' ORDER BY iteration) FILTER (WHERE grad_norm > %g * rolling_median), '') AS spike_iterations
FROM g GROUP BY estimator, model, agent ORDER BY estimator, model, agent = '*' DESC, agent`, p.Window, p.SpikeK, p.SpikeK)
		},
	},
	"evaldelta": {
		help:  "avg@k per split (held-out eval, train) and evaluated step, and its paired change from the split's first evaluated step (same prompts), with the change's standard error, per data source",
		views: []string{"eval_prompts"},
		sql: func(ReportParams) string {
			return `WITH p AS (
  SELECT split, step, data_source, task_id, successes::DOUBLE / k AS acc FROM eval_prompts
  UNION ALL
  SELECT split, step, 'all', task_id, successes::DOUBLE / k FROM eval_prompts
), first AS (
  SELECT split, min(step) AS step0 FROM eval_prompts GROUP BY split
), base AS (
  SELECT p.split, p.data_source, p.task_id, p.acc AS acc0 FROM p JOIN first ON p.split = first.split AND p.step = first.step0
)
SELECT p.split, p.step, p.data_source, count(*) AS prompts, avg(p.acc ORDER BY p.task_id, p.acc) AS avg_at_k,
  avg(base.acc0 ORDER BY p.task_id, base.acc0) AS base_avg_at_k, avg(p.acc - base.acc0 ORDER BY p.task_id, p.acc - base.acc0) AS delta,
  stddev_samp(p.acc - base.acc0 ORDER BY p.task_id, p.acc - base.acc0) / sqrt(count(*)) AS delta_se,
  count(*) FILTER (WHERE p.acc > base.acc0) AS prompts_up, count(*) FILTER (WHERE p.acc < base.acc0) AS prompts_down
FROM p JOIN base USING (split, data_source, task_id)
GROUP BY p.split, p.step, p.data_source ORDER BY p.split, p.step, p.data_source = 'all', p.data_source`
		},
	},
	"success": {
		help:  "avg@k and pass@k per data source per evaluated checkpoint step (the verifier's accept rates on correct and wrong candidates and the answers' mean F1 where the workflow has them)",
		views: []string{"evals"},
		sql: func(ReportParams) string {
			return `SELECT step, data_source, k, prompts, avg_at_k, pass_at_k, verifier_accept_correct, verifier_accept_wrong, f1_mean FROM evals
ORDER BY step, data_source = 'all', data_source`
		},
	},
}

// Reports lists the canned reports with a line of help each, sorted by name.
func Reports() []string {
	names := make([]string, 0, len(reports))
	for n := range reports {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%-10s %s", n, reports[n].help)
	}
	return out
}

// ReportSQL returns the SQL of a canned report (for people who want to adapt it).
func ReportSQL(name string, p ReportParams) (string, error) {
	r, ok := reports[name]
	if !ok {
		names := make([]string, 0, len(reports))
		for n := range reports {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("unknown report %q (have %s)", name, strings.Join(names, ", "))
	}
	if err := p.validate(); err != nil {
		return "", fmt.Errorf("report %s: %w", name, err)
	}
	return r.sql(p.withDefaults()), nil
}

// Report runs a canned report. A report over a view with no committed files says so.
func (s *Session) Report(ctx context.Context, name string, p ReportParams) (*Table, error) {
	q, err := ReportSQL(name, p)
	if err != nil {
		return nil, err
	}
	for _, v := range reports[name].views {
		if s.Empty(v) {
			return nil, s.NotYet(v)
		}
	}
	t, err := s.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", name, err)
	}
	return t, nil
}
