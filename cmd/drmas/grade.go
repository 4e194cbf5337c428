package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/workflows/mathgrade"
	"github.com/drmas-dev/drmas/workflows/searchgrade"
)

func newGradeCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "grade",
		Short: "Grade one response as the math or search workflow's reward does (prints 1 or 0)",
		Long: `Grades one model response against its ground truth with the same grader the workflows use
for dataset tasks, and prints the reward, 1 or 0, on stdout. A short reason goes to stderr:
the extracted answer and both sides after normalization. The exit status is 0 whatever the
reward; it is 1 only when the command itself is wrong (a missing flag, a malformed truth).`,
		Example: `  drmas grade math --response 'so the answer is \boxed{\frac12}' --truth 0.5
  drmas grade search --response '<answer>The Beatles</answer>' --truth '["Beatles", "the beatles"]'`,
	})
	cmd.AddCommand(newGradeMathCmd(), newGradeSearchCmd())
	return cmd
}

func gradeFlags(cmd *cobra.Command, truthHelp string) (resp, truth *string) {
	resp = cmd.Flags().String("response", "", "the model's response text (required)")
	truth = cmd.Flags().String("truth", "", truthHelp+" (required)")
	_ = cmd.MarkFlagRequired("response")
	_ = cmd.MarkFlagRequired("truth")
	return resp, truth
}

func newGradeMathCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "math --response TEXT --truth TEXT",
		Short: `Grade a math response: its last \boxed{…} against the ground truth (MATH-style)`,
		Long: `Takes the answer from the response's last \boxed{…} (\boxed 5 and \fbox{…} too; after
</think> when there is one), normalizes it and the truth as the MATH grader does, and prints
1 when they are equivalent (equal strings, or the same number or simple expression; tuples
and intervals element by element), else 0. No boxed answer is a format error: 0. The rules
and an example of each are in docs/tasks.md ("Math grading").`,
		Args: cobra.NoArgs,
	}
	resp, truth := gradeFlags(cmd, `the ground truth, e.g. \frac{1}{2}`)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r := mathgrade.Grade(*resp, []string{*truth})
		fmt.Fprintf(cmd.ErrOrStderr(), "%s; extracted %s, normalized answer %s, normalized truth %s\n",
			r.Reason, show(r.Extracted), show(r.Answer), show(r.Truth))
		fmt.Fprintln(cmd.OutOrStdout(), strconv.FormatFloat(r.Reward, 'f', -1, 64))
		return nil
	}
	return cmd
}

func newGradeSearchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "search --response TEXT --truth JSON_LIST",
		Short: "Grade a search response: its last <answer>…</answer> against golden answers (exact match)",
		Long: `Takes the answer from the response's last <answer>…</answer> (or drmas's answerer action
"a <answer>"), normalizes it and each golden answer as SQuAD does (lowercase; punctuation, the
articles a/an/the and extra spaces removed) and prints 1 when it equals any of them, else 0.
The token F1 against the best golden answer is printed on stderr with the reason.`,
		Args: cobra.NoArgs,
	}
	resp, truth := gradeFlags(cmd, `the golden answers as a JSON list, e.g. '["Paris", "paris, france"]'`)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		golden, err := searchgrade.ParseGolden(*truth)
		if err != nil {
			return fmt.Errorf("--truth: %w", err)
		}
		r := searchgrade.Grade(*resp, golden)
		fmt.Fprintf(cmd.ErrOrStderr(), "%s; extracted %s, normalized answer %s, normalized golden [%s], F1 %.4g\n",
			r.Reason, show(r.Extracted), show(r.Answer), showAll(r.Golden), r.F1)
		fmt.Fprintln(cmd.OutOrStdout(), strconv.FormatFloat(r.Reward, 'f', -1, 64))
		return nil
	}
	return cmd
}

// show quotes s for a one-line reason without escaping LaTeX's backslashes.
func show(s string) string {
	return `"` + strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s) + `"`
}

func showAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = show(s)
	}
	return strings.Join(q, ", ")
}
