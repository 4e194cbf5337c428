package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/stages/importer"
)

func newImportCmd() *cobra.Command {
	var o importer.Options
	cmd := &cobra.Command{
		Use:   "import FILE --iter N",
		Short: "Import trajectories from another RL framework as a committed rollout iteration",
		Long: `Turns trajectories produced elsewhere into the rollout of iteration N of the run (--run), so they
can be reanalysed like drmas's own: 'drmas run-stage normalize --iter N --estimator drmas,grpo',
DuckDB over runs/<run>/iter=N/rollout/*.parquet.

FILE is JSONL (one JSON object per line; .jsonl, .ndjson, .json) or Parquet (.parquet, .pq);
--format overrides the extension. One row per agent invocation. Columns:

` + columnHelp() + `
Defaults: sample = the index of the traj_uid within its uid in first-seen order (give it on
every row or on none), task_id = uid, data_source = "imported", model = the agent's model in
the config (agents.<agent>.model), else the agent name, episode_reward = score, valid = true,
policy_version = 0. Unknown columns are ignored; a JSON null is an absent field. Example
JSONL line:

  {"uid":"q17","traj_uid":"q17-s0","agent":"solver","step":0,"score":1.0,"response_text":"42"}

The whole file is checked before anything is written: non-finite scores, empty uid or agent,
duplicate (traj_uid, step, agent), a traj_uid under two uids, response_logprobs whose length is
not that of response_ids, wrong types, missing columns, a field given twice on a JSONL line,
ids, names and data_source holding U+FFFD, the replacement character, which bytes that are
not UTF-8 and JSON escapes of lone surrogates such as \ud800 decode to (it would merge two
ids; in prompt_text and response_text it stays, as rollout stores text), a Parquet struct
where a value is wanted, and Parquet columns whose stored value is not the value they mean (DECIMAL, DATE, TIME,
TIMESTAMP, 32- or 64-bit unsigned integers: cast them, e.g. CAST(score AS DOUBLE); DuckDB
writes a literal like 0.5 as a DECIMAL). Every problem is listed (the first 20)
with the JSONL line (from 1) or Parquet row (from 0), and on any problem nothing is written.

Rows are sorted by (uid, sample, step, agent in first-seen order) and split into --parts parts
(whole uids, balanced by rows). The manifest records the file's sha256: importing the same file
again is a no-op; importing other content into a committed iteration is refused.
The file is read into memory whole, with about 1 KB per row; a Parquet footer above 16 MiB
(a file of very many small row groups) is refused: rewrite it with larger row groups.`,
		Example: `  drmas --run imported import trajectories.jsonl --iter 0 --score-col reward
  drmas --run imported run-stage normalize --iter 0 --estimator drmas,grpo`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("import: give one FILE to import (JSONL or Parquet), not %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Path = args[0]
			if !cmd.Flags().Changed("iter") {
				return fmt.Errorf("import: --iter is required")
			}
			if err := checkIter("iter", o.Iteration); err != nil {
				return fmt.Errorf("import: %w", err)
			}
			env, done, err := openEnv(cmd)
			if err != nil {
				return err
			}
			defer done()
			res, err := importer.Run(cmd.Context(), env, o)
			if err != nil {
				return err
			}
			if res.Skipped {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: already imported as %s\n", o.Path, res.Dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s → %s: %d rows, %d uids, %d trajectories, agents %s, %d parts, policy_version %d\n",
				o.Path, res.Dir, res.Rows, res.Groups, res.Trajectories, strings.Join(res.Agents, ","), res.Parts, res.PolicyVersion)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Iteration, "iter", 0, "iteration to commit the trajectories as (required)")
	f.IntVar(&o.Parts, "parts", 0, "number of parts (default: rollout.parts)")
	f.StringVar(&o.Format, "format", "", "input format: jsonl or parquet (default: from the extension)")
	f.StringVar(&o.ScoreColumn, "score-col", "score", "input column to read as the row score (e.g. reward)")
	return cmd
}

func columnHelp() string {
	var sb strings.Builder
	for _, c := range importer.Columns() {
		req := ""
		if c.Required {
			req = "  (required)"
		}
		fmt.Fprintf(&sb, "  %-18s %s%s\n", c.Name, c.Type, req)
	}
	return sb.String()
}
