package analysis_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestTimesRenderAsDuckDBInAnyTimeZone: on a machine whose time zone is not UTC, a
// TIMESTAMPTZ still renders as DuckDB's own cast in the session prints it (the session runs in
// UTC), and a TIMETZ offset with seconds keeps them.
func TestTimesRenderAsDuckDBInAnyTimeZone(t *testing.T) {
	renderedLikeDuckDB(t, emptySession(t), []string{"TIMETZ '00:00:00+15:59:59'", "TIMETZ '01:02:03-00:00:30'"})
	if os.Getenv("DRMAS_TZ_CHILD") != "" {
		return
	}
	for _, tz := range []string{"America/New_York", "Asia/Kolkata"} {
		cmd := exec.Command(os.Args[0], "-test.run=^(TestNumbersAndTimesRenderAsDuckDB|TestTimesRenderAsDuckDBInAnyTimeZone)$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TZ="+tz, "DRMAS_TZ_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("TZ=%s: %v\n%s", tz, err, out)
		}
	}
}
