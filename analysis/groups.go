package analysis

import "fmt"

// ConditionGroupsSQL is the SQL of the Lemma 4.2 inflation per prompt group and agent (rollouts
// view), by the rules of ConditionIterSQL: columns iteration, agent, uid, rows, mu_k, sd_k, mu,
// sd, inflation, for the groups with σ > 0 only (the others have no inflation), ordered by
// iteration, agent, uid. Pooling runs' groups gives a p90 over all of them, which per-run p90s
// cannot.
func ConditionGroupsSQL() string {
	return fmt.Sprintf(`WITH `+groupStatsSQL+`
SELECT iteration, agent, uid, rows, mu_k, sd_k, mu, sd, inflation FROM gi
WHERE inflation IS NOT NULL ORDER BY iteration, agent, uid`, conditionEps)
}
