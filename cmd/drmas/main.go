// Command drmas runs the Dr. MAS multi-agent RL pipeline: rollout → normalize → learn over
// object storage, one stage at a time (`drmas run-stage`) or as the whole loop (`drmas run`).
//
// This package only binds flags into the library's structs; the work lives in stages/ and
// pipeline/.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runRoot(ctx, newRootCmd()); err != nil {
		fmt.Fprintln(os.Stderr, "drmas:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// runRoot runs root and returns its error followed by what to do about it (advise), with the
// commands it suggests completed by the invocation's --config, --store, --run and --seed
// (completeHints).
func runRoot(ctx context.Context, root *cobra.Command) error {
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	if msg := completeHints(advise(err), placeArgs(cmd)); msg != err.Error() {
		return hinted{msg, err}
	}
	return err
}

// hinted is an error whose message completeHints rewrote; it still matches what err matches.
type hinted struct {
	msg string
	err error
}

func (h hinted) Error() string { return h.msg }
func (h hinted) Unwrap() error { return h.err }

func newRootCmd() *cobra.Command {
	root := group(&cobra.Command{
		Use:   "drmas",
		Short: "Stable RL post-training of multi-agent LLM systems (Dr. MAS) over object storage",
		Long: `drmas trains multi-agent LLM systems (a solver and a verifier; a router, a searcher and an
answerer) with group-relative RL, normalizing advantages per (prompt group × agent) — the
Dr. MAS method — as a batch pipeline over object storage:

  rollout    run the workflow, write Parquet trajectory shards
  normalize  compute advantages per estimator into narrow sidecars + per-agent diagnostics
  learn      PPO update per model, publish a checkpoint

Every stage reads only committed inputs and commits its outputs (a _MANIFEST.json written last),
so each can run alone, be rerun, or resume. Configuration precedence: flags > DRMAS_* env >
--config file > the embedded default (see 'drmas config show').`,
		Example: `  drmas config default > my.yaml                  # a config file to edit
  drmas --config my.yaml run                      # warm-up, then rollout → normalize → learn
  drmas --config my.yaml analyze --report rewards # what the run learned`,
		SilenceUsage:  true,
		SilenceErrors: true,
	})
	pf := root.PersistentFlags()
	pf.String("config", "", "config file: .yaml, .yml, .json or .toml; default: the embedded default")
	pf.String("store", "", "store URL: a folder, file:///abs/path or s3://bucket/prefix (key: store)")
	pf.String("run", "", "run name (key: run)")
	pf.String("seed", "", "run seed, a decimal integer (key: seed; default from the config)")
	pf.BoolP("quiet", "q", false, "no progress bars")
	addMemoryLimitFlag(pf)
	root.AddCommand(newVersionCmd(), newConfigCmd(), newRunStageCmd(), newRunCmd(), newImportCmd())
	root.AddCommand(newAnalyzeCmd(), newAblateCmd(), newReportCmd())
	root.AddCommand(newServeCmd())
	root.AddCommand(newJobsCmd(), newDevicesCmd())
	root.AddCommand(newGradeCmd())
	root.AddCommand(newRetrieverCmd())
	root.AddCommand(newModelCmd())
	root.AddCommand(newDocsCmd())
	return root
}
