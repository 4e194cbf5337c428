// Package estimators computes the group-relative advantages of the drmas normalize stage and the
// per-agent diagnostics of Dr. MAS (Lemma 4.2 of the paper), on row-aligned key and score
// columns.
//
// What is promised:
//
//   - Formulas are exactly those of docs/design.md, "Estimators": ε defaults to 1e-6 (DefaultEps); std is the
//     unbiased sample std (divide by n−1); a statistic over ONE element uses μ = 0, σ = 1
//     (the reference behaviour of verl). Estimators: grpo (trajectory level), drmas (per uid and
//     agent), grpo_step (per uid, all rows pooled), each with or without division by σ (Dr.GRPO
//     form A = score − μ), and rloo per uid or per (uid, agent) (a group of one gets A = 0).
//     Spec names are described at ParseSpec. One refinement, identical in exact arithmetic: when
//     all values of a statistic are equal, μ is that value and σ = 0 exactly (the two-pass
//     formula can leave a rounding residue ~1e-17 in σ), so "σ = 0" tests are reliable; the
//     advantage is then 0/(0+ε) = 0. (σ is also 0 when the values differ by less than about
//     1e-154, whose squared deviations underflow float64: their advantages are then (x − μ)/ε,
//     which rounds to 0 in float32 for any ε above about 1e-100, is meaningless below, and is an
//     *OverflowError asking for a larger ε where it overflows.)
//   - Compute and ComputeMany are the fast path: one pass over the contiguous group runs of
//     Columns (rows of one uid are adjacent, as in sorted shards), no hash maps, fixed-order
//     two-pass mean/variance in float64, no allocations once the Result is large enough
//     (Results keep reusable scratch space), and ctx checked on entry and every 64 Ki rows. Their output
//     equals Reference — a plain, map-based transcription of the formulas — to float rounding
//     (the float64 statistics are in practice bit-identical, since both sum in row order). The
//     exception is rloo: the fast path takes the leave-one-out mean as (Σ − x)/(n−1), Reference
//     sums the other rows, and when scores of very different size cancel (1e16, 1, −1e16) the
//     two differ by up to about n·2⁻⁵²·max|score| of the group (1.5 against 1 there).
//   - Every entry point validates its input: lengths, finite scores, non-negative codes, agent
//     codes below NumAgents, contiguous groups. Invalid input is an error (*ValidationError,
//     listing every problem with row indices), never a silently wrong column. So are scores
//     finite but so large that a statistic overflows float64 or an advantage float32 (beyond
//     about 1e154 or 1e38): the error (*OverflowError) names the first such row, its group
//     and agent, and Reference returns the same one. On error the contents of the Result are unspecified.
//   - Trajectories are identified by the pair (Group, Traj); rows of one trajectory need not be
//     adjacent within their group (they are in sorted shards, which is the fast case).
//   - Diagnose gives, per agent, the Lemma 4.2 statistics averaged over the groups where the agent
//     appears; DiagnoseReference is its map-based oracle.
//
// Results are float64 throughout except Advantage, which is float32 as stored in the sidecar
// (computed in float64 and rounded once).
//
// # Adding an estimator
//
// Every estimator name drmas accepts is one entry of [Estimators] (table.go): its name, the
// Spec it computes, whether it takes the _nostd and _eps<float> suffixes, the columns it reads,
// its fast path and its reference, and its --help line. Parsing ([ParseSpec], [Resolve], which
// the config loader, normalize and the pipeline all use), the list of names in errors and
// `drmas run-stage normalize --help` come from that table. A new name for an existing formula
// (an alias, or a new setting of Spec) is one entry. A new formula also needs an [Estimator]
// constant, its branch in Compute (compute.go) and in Reference (reference.go), and its name in
// the tests' allSpecNames; TestEstimatorTable fails until the entry is covered by the tests
// that hold Compute to Reference.
package estimators
