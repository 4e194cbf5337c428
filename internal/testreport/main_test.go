package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// fixtureEvents runs `go test -json` over testdata/fixture, a module whose packages fail in
// every way a package can: a build failure (buildfail), a panicking test (panic), a test that
// fails after its subtest passed and a panicking parallel subtest (subfail), TestMain exiting
// before any test (mainexit), a test killed by -timeout (hang), next to passing and skipped
// tests (ok) and a package without tests (notests).
func fixtureEvents(t *testing.T) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go") // there under go test: its absence is a broken setup
	if err != nil {
		t.Fatalf("no go command to run the fixture module: %v", err)
	}
	cmd := exec.Command(gobin, "test", "-count=1", "-timeout=2s", "-json", "./...")
	cmd.Dir = "testdata/fixture"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); !ok || len(out) == 0 {
		t.Fatalf("go test over the fixture: %v (want exit status 1 with events)\n%s", err, stderr.String())
	}
	return out
}

// only keeps the events of the named packages.
func only(t *testing.T, events []byte, pkgs ...string) []byte {
	t.Helper()
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(events))
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			if e.Package == "fixture/"+p {
				out.Write(sc.Bytes())
				out.WriteByte('\n')
			}
		}
	}
	return out.Bytes()
}

func run(in []byte) (code int, out, errOut string) {
	var o, e bytes.Buffer
	code = report(bytes.NewReader(in), &o, &e)
	return code, o.String(), e.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestReportCountsEveryKindOfFailure(t *testing.T) {
	events := fixtureEvents(t)
	code, out, _ := run(events)
	// Passed: ok.TestA, panic.TestOK. Failed: panic.TestPanic, subfail.TestParent,
	// subfail.TestSubPanic and hang.TestHang (killed by the timeout: no result event of its
	// own). Packages failed: buildfail, hang, mainexit, panic, subfail.
	if want := "tests: 2 passed, 4 failed, 1 skipped, 5 packages failed"; lastLine(out) != want || code != 1 {
		t.Fatalf("exit %d, summary %q; want 1, %q\n%s", code, lastLine(out), want, out)
	}
	for _, want := range []string{
		"undefined: undefinedThing",      // the compiler error
		"panic: boom",                    // the panicking test's output
		"after subtests",                 // the parent's failure after its subtests
		"hang log line",                  // the output of the test the timeout killed…
		"panic: test timed out after 2s", // …with the panic that names it
		"FAIL fixture/mainexit",          // TestMain's exit
		"?    fixture/notests",           // no test files
		"ok   fixture/ok",                // a passing package
		"FAIL fixture/buildfail",         // the package that did not build
		"FAIL fixture/hang",              // the package that timed out
		"--- FAIL: TestSubPanic/p",       // the failing subtest's output
		"FAIL\tfixture/subfail",          // go test's own package line
		"panic: sub boom",                // the subtest's panic
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "=== RUN   TestA\n") {
		t.Error("report prints the output of a passing test")
	}

	// Passing and skipped tests alone: success.
	if code, out, _ := run(only(t, events, "ok", "notests")); code != 0 || lastLine(out) != "tests: 1 passed, 0 failed, 1 skipped" {
		t.Fatalf("passing packages: exit %d, %q", code, lastLine(out))
	}
	// A stream cut off before a package's result (go test killed): that package failed.
	ok := only(t, events, "ok")
	cut := ok[:bytes.LastIndex(bytes.TrimRight(ok, "\n"), []byte("\n"))+1]
	if code, out, _ := run(cut); code != 1 || !strings.Contains(out, "FAIL fixture/ok\t(no result") || !strings.HasSuffix(lastLine(out), ", 1 packages failed") {
		t.Fatalf("truncated stream: exit %d\n%s", code, out)
	}
}

// TestReportFailsWithoutResults: go test that fails before running any package (a malformed
// go.mod, a bad flag) writes its error to stderr and no event; in a pipeline without pipefail
// the report's exit status is the pipeline's, so reading nothing must not read as success.
func TestReportFailsWithoutResults(t *testing.T) {
	for _, in := range []string{"", "go: errors parsing go.mod:\n"} {
		code, out, errOut := run([]byte(in))
		if code != 1 || lastLine(out) != "tests: 0 passed, 0 failed, 0 skipped" || !strings.Contains(errOut, "no package results") {
			t.Errorf("input %q: exit %d, out %q, stderr %q; want exit 1 and a message", in, code, out, errOut)
		}
	}
}
