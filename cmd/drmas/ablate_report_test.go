package main

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/report"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestAblateOnPolicyWritesPooledReport: the experiment driver as a user runs it, one command for
// 2 seeds × 2 estimators × 2 iterations and the pooled report, whose tables are each there with
// one row per estimator (held out), per metric (paired), per estimator and agent (spikes).
func TestAblateOnPolicyWritesPooledReport(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(cfg, []byte(stagetest.TinyConfigYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pooled.html")
	stdout, stderr, err := execute(t, "-q", "--config", cfg, "--store", filepath.Join(dir, "store"), "--run", "exp",
		"ablate", "--mode", "onpolicy", "--estimators", "grpo,drmas", "--seeds", "2,1", "--iters", "0..1",
		"--report", out, "--cache", filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "runs exp-drmas-s1, exp-drmas-s2, exp-grpo-s1, exp-grpo-s2") || !strings.Contains(stdout, out+": ") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	// The comparison is printed too: the paired table's avg@k row over 2 seeds.
	if !strings.Contains(stdout, "\n"+report.TablePaired+"\n") || !regexp.MustCompile(`(?m)^grpo +avg@k +2 +`).MatchString(stdout) {
		t.Errorf("stdout lacks the paired table:\n%s", stdout)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(title string) [][]string {
		i := strings.Index(string(page), "<h3>"+html.EscapeString(title)+"</h3>")
		if i < 0 {
			t.Fatalf("no table %q in the report", title)
		}
		body := string(page[i:])
		body = body[:strings.Index(body, "</table>")]
		var out [][]string
		for _, tr := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
			var cells []string
			for _, td := range regexp.MustCompile(`<td>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
				cells = append(cells, td[1])
			}
			if len(cells) > 0 {
				out = append(out, cells)
			}
		}
		return out
	}
	if ho := rows(report.TableHeldOut); len(ho) != 2 || ho[0][0] != "drmas" || ho[0][1] != "2" || ho[0][7] != "1" {
		t.Errorf("held-out rows %v: want drmas and grpo, 2 seeds, df 1", ho)
	}
	if pd := rows(report.TablePaired); len(pd) != 2 || pd[0][0] != "grpo" || pd[0][1] != "avg@k" || pd[1][1] != "pass@k" || pd[0][2] != "2" {
		t.Errorf("paired rows %v: want grpo avg@k and pass@k over 2 seeds", pd)
	}
	if sp := rows(report.TableSpikes); len(sp) != 4 {
		t.Errorf("spike rows %v: want 2 estimators × 2 agents", sp)
	}
	for _, title := range []string{report.TableRatioFit, report.TableInflation} {
		rows(title)
	}
}
