package analysis

import "fmt"

// The condition of Dr. MAS's Lemma 4.2, measured from the rollouts themselves: per group (uid)
// and agent, μ_k, σ_k of the agent's rows and μ, σ of all the group's rows, with the
// normalize rules (unbiased std; a single row has μ = 0, σ = 1; equal scores have σ = 0 exactly,
// decided by min = max rather than by a float std that may come out 1e-17), and the inflation
// (σ_k² + (μ_k − μ)²)/σ² where σ > 0. The diagnostics give its mean and max per iteration;
// these give its distribution (p90) and a second predictor of the gradient-norm ratio.
//
// The second predictor is the advantage energy: if every row's gradient had the same norm and
// the rows' gradients were orthogonal, an agent's gradient norm would be proportional to the
// root of the sum of its squared advantages, so the GRPO / Dr. MAS norm ratio would be
// √(Σ A²_grpo / Σ A²_drmas) over the agent's rows. Unlike the mean inflation it weighs groups by
// their rows and counts the groups where σ_k = 0 (no Dr. MAS signal, but a GRPO one). What
// remains between it and the measured ratio is the tokens: their number per row and how their
// gradients align.
const groupStatsSQL = `k AS (
  SELECT iteration, uid, agent, count(*) AS n,
    CASE WHEN count(*) = 1 THEN 0 WHEN min(score) = max(score) THEN min(score) ELSE avg(score ORDER BY row_id) END AS mu_k,
    CASE WHEN count(*) = 1 THEN 1 WHEN min(score) = max(score) THEN 0 ELSE stddev_samp(score ORDER BY row_id) END AS sd_k
  FROM rollouts GROUP BY iteration, uid, agent
), g AS (
  SELECT iteration, uid, count(*) AS n,
    CASE WHEN count(*) = 1 THEN 0 WHEN min(score) = max(score) THEN min(score) ELSE avg(score ORDER BY row_id) END AS mu,
    CASE WHEN count(*) = 1 THEN 1 WHEN min(score) = max(score) THEN 0 ELSE stddev_samp(score ORDER BY row_id) END AS sd
  FROM rollouts GROUP BY iteration, uid
), tr AS (
  SELECT iteration, uid, traj_uid, avg(score ORDER BY row_id) AS r FROM rollouts GROUP BY iteration, uid, traj_uid
), t AS (
  SELECT iteration, uid, count(*) AS n,
    CASE WHEN count(*) = 1 THEN 0 WHEN min(r) = max(r) THEN min(r) ELSE avg(r ORDER BY traj_uid) END AS mu_t,
    CASE WHEN count(*) = 1 THEN 1 WHEN min(r) = max(r) THEN 0 ELSE stddev_samp(r ORDER BY traj_uid) END AS sd_t
  FROM tr GROUP BY iteration, uid
), gi AS (
  SELECT iteration, uid, agent, k.n AS rows, mu_k, sd_k, mu, sd,
    CASE WHEN sd > 0 THEN (sd_k * sd_k + (mu_k - mu) * (mu_k - mu)) / (sd * sd) END AS inflation
  FROM k JOIN g USING (iteration, uid)
), adv AS (
  SELECT r.iteration, r.agent, r.row_id,
    (r.score - k.mu_k) / (k.sd_k + %[1]g) AS a_drmas,
    (r.score - g.mu) / (g.sd + %[1]g) AS a_grpo_step,
    (tr.r - t.mu_t) / (t.sd_t + %[1]g) AS a_grpo
  FROM rollouts r JOIN k USING (iteration, uid, agent) JOIN g USING (iteration, uid)
    JOIN tr USING (iteration, uid, traj_uid) JOIN t USING (iteration, uid)
), energy AS (
  SELECT iteration, agent, sum(a_drmas * a_drmas ORDER BY row_id) AS e_drmas,
    sum(a_grpo_step * a_grpo_step ORDER BY row_id) AS e_grpo_step, sum(a_grpo * a_grpo ORDER BY row_id) AS e_grpo
  FROM adv GROUP BY iteration, agent
), coherent AS (
  SELECT iteration, agent, sum(s_drmas * s_drmas ORDER BY uid) AS c_drmas, sum(s_grpo_step * s_grpo_step ORDER BY uid) AS c_grpo_step,
    sum(s_grpo * s_grpo ORDER BY uid) AS c_grpo
  FROM (SELECT iteration, uid, agent, sum(a_drmas ORDER BY row_id) AS s_drmas, sum(a_grpo_step ORDER BY row_id) AS s_grpo_step,
      sum(a_grpo ORDER BY row_id) AS s_grpo
    FROM adv JOIN (SELECT iteration, row_id, uid FROM rollouts) USING (iteration, row_id) GROUP BY iteration, uid, agent)
  GROUP BY iteration, agent
)`

// conditionEps is the ε of the predicted advantages: the default normalize.eps.
const conditionEps = 1e-6

// conditionIterSQL is the condition per iteration and agent: the inflation's mean, p90 and max
// over the groups with σ > 0, the share of the agent's groups with σ = 0 and with σ_k = 0, the
// mean |μ_k − μ|, and the predicted GRPO / Dr. MAS grad-norm ratios.
func conditionIterSQL() string {
	return fmt.Sprintf(`WITH `+groupStatsSQL+`, c AS (
  SELECT iteration, agent, count(*) AS groups, count(inflation) AS inflation_groups,
    avg(inflation ORDER BY uid) AS inflation_mean, quantile_cont(inflation, 0.9) AS inflation_p90, max(inflation) AS inflation_max,
    avg(CASE WHEN sd = 0 THEN 1 ELSE 0 END) AS zero_sigma_share, avg(CASE WHEN sd_k = 0 THEN 1 ELSE 0 END) AS zero_sigma_k_share,
    avg(abs(mu_k - mu) ORDER BY uid) AS mu_gap_mean
  FROM gi GROUP BY iteration, agent
)
SELECT c.*, sqrt(inflation_mean) AS pred_sqrt_inflation,
  sqrt(e_grpo_step / nullif(e_drmas, 0)) AS pred_energy_grpo_step, sqrt(e_grpo / nullif(e_drmas, 0)) AS pred_energy_grpo,
  e_drmas, e_grpo_step, e_grpo, c_drmas, c_grpo_step, c_grpo
FROM c JOIN energy USING (iteration, agent) JOIN coherent USING (iteration, agent)`, conditionEps)
}

// inflationSQL is the inflation report: the diagnostics per iteration, estimator and agent, with
// the p90 over groups from the rollouts.
func inflationSQL(ReportParams) string {
	return `WITH c AS (` + conditionIterSQL() + `)
SELECT d.iteration, d.estimator, d.agent, d.groups, d.inflation_groups, d.inflation_mean, c.inflation_p90, d.inflation_max,
  d.zero_sigma_k_share, d.mu_k, d.sigma_k, d.mu, d.sigma, d.adv_abs_mean, d.adv_std
FROM diagnostics d LEFT JOIN c ON c.iteration = d.iteration AND c.agent = d.agent
ORDER BY d.iteration, d.estimator, d.agent`
}

// conditionSQL is the condition report: per agent over every group of every iteration.
func conditionSQL(ReportParams) string {
	return fmt.Sprintf(`WITH `+groupStatsSQL+`
SELECT agent, count(DISTINCT iteration) AS iterations, count(*) AS groups, count(inflation) AS inflation_groups,
  avg(inflation ORDER BY iteration, uid) AS inflation_mean, quantile_cont(inflation, 0.9) AS inflation_p90, max(inflation) AS inflation_max,
  avg(CASE WHEN sd = 0 THEN 1 ELSE 0 END) AS zero_sigma_share, avg(CASE WHEN sd_k = 0 THEN 1 ELSE 0 END) AS zero_sigma_k_share,
  avg(abs(mu_k - mu) ORDER BY iteration, uid) AS mu_gap_mean,
  (SELECT sqrt(sum(e_grpo_step) / nullif(sum(e_drmas), 0)) FROM energy e WHERE e.agent = gi.agent) AS pred_energy_grpo_step
FROM gi GROUP BY agent ORDER BY agent`, conditionEps)
}

// ConditionIterSQL is the SQL of the per-iteration condition (rollouts view), for the report's
// predicted-vs-measured figure: columns iteration, agent, groups, inflation_groups,
// inflation_mean, inflation_p90, inflation_max, zero_sigma_share, zero_sigma_k_share,
// mu_gap_mean, pred_sqrt_inflation, pred_energy_grpo_step, pred_energy_grpo, and the sums behind
// them: e_<est> = ΣA² over the agent's rows and c_<est> = Σ over groups of (ΣA over the agent's
// rows in the group)², the advantage mass that multiplies the gradient the agent's rows of a
// group share (zero for drmas up to ε, as its advantages sum to 0 per group and agent).
func ConditionIterSQL() string { return conditionIterSQL() }

func init() {
	reports["condition_iter"] = report{
		help:  "the condition per iteration and agent (from the rollouts): the condition report's columns, √(mean inflation), and the advantage sums behind the predictions (e_<est> = ΣA², c_<est> = Σ_groups (ΣA)²) for drmas, grpo_step, grpo",
		views: []string{"rollouts"},
		sql:   func(ReportParams) string { return conditionIterSQL() + "\nORDER BY iteration, agent" },
	}
	reports["condition"] = report{
		help:  "the Lemma 4.2 condition per agent over all groups of all iterations (from the rollouts): inflation mean, p90 and max over groups with σ > 0, share of groups with σ = 0 / σ_k = 0, mean |μ_k − μ|, and the predicted GRPO-step / Dr. MAS grad-norm ratio √(ΣA²) (advantage energy)",
		views: []string{"rollouts"},
		sql:   conditionSQL,
	}
}
