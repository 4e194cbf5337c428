// Command testreport reads `go test -json` events on stdin, prints each package's result line
// and the full output of every failing test, and ends with one summary line
// "tests: N passed, M failed, K skipped" (followed on the same line by ", P packages failed"
// when a package failed as a whole: a build or setup failure, TestMain, a crash). It exits 1
// if any test or package failed, and also if it read no package result at all or a package
// that started never ended (go test failed before running anything, e.g. a malformed go.mod,
// or was killed), so a pipeline without pipefail cannot report success for tests that never
// ran.
//
// A test that never ends because its binary died under it (the -timeout panic, os.Exit or
// log.Fatal in a test) counts as failed, and its output, which holds the panic and the
// goroutine dump, is printed with the package's failure.
//
//	go test -json ./... | go run ./internal/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	os.Exit(report(os.Stdin, os.Stdout, os.Stderr))
}

// pkgState is what report keeps of a package until its result arrives.
type pkgState struct {
	tests          []string       // tests that started, in order of their first run
	started, ended map[string]int // runs and results per test (-count=N runs a test N times)
}

// report summarises the events read from in on out and returns the exit status.
func report(in io.Reader, out, errOut io.Writer) int {
	var passed, failed, skipped, pkgFailed, results int
	output := map[string][]string{} // package/test → output lines, kept until the test ends
	pkgs := map[string]*pkgState{}
	var order []string // packages in order of their first event
	state := func(pkg string) *pkgState {
		p := pkgs[pkg]
		if p == nil {
			p = &pkgState{started: map[string]int{}, ended: map[string]int{}}
			pkgs[pkg] = p
			order = append(order, pkg)
		}
		return p
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(out, sc.Text()) // not an event (e.g. a build error): pass it through
			continue
		}
		key := e.Package + "/" + e.Test
		switch e.Action {
		case "build-output": // compiler errors of a package that failed to build
			fmt.Fprint(out, e.Output)
		case "start":
			state(e.Package)
		case "run":
			p := state(e.Package)
			if p.started[e.Test] == 0 {
				p.tests = append(p.tests, e.Test)
			}
			p.started[e.Test]++
		case "output":
			output[key] = append(output[key], e.Output)
		case "pass", "fail", "skip":
			lines := output[key]
			delete(output, key)
			if e.Test == "" { // the package's result
				results++
				p := state(e.Package)
				delete(pkgs, e.Package)
				// Tests that never ended: the binary died under them (a timeout, os.Exit).
				for _, name := range p.tests {
					if p.ended[name] >= p.started[name] {
						continue
					}
					fmt.Fprint(out, strings.Join(output[e.Package+"/"+name], ""))
					delete(output, e.Package+"/"+name)
					if !strings.Contains(name, "/") {
						failed++
					}
				}
				if e.Action == "fail" {
					pkgFailed++
					fmt.Fprint(out, strings.Join(lines, ""))
				}
				fmt.Fprintf(out, "%-4s %s\t%.1fs\n", map[string]string{"pass": "ok", "fail": "FAIL", "skip": "?"}[e.Action], e.Package, e.Elapsed)
				continue
			}
			state(e.Package).ended[e.Test]++
			if strings.Contains(e.Test, "/") { // subtests are counted through their parents
				if e.Action == "fail" {
					fmt.Fprint(out, strings.Join(lines, ""))
				}
				continue
			}
			switch e.Action {
			case "pass":
				passed++
			case "skip":
				skipped++
			case "fail":
				failed++
				fmt.Fprint(out, strings.Join(lines, ""))
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(errOut, "testreport:", err)
		return 1
	}
	for _, pkg := range order {
		if _, ok := pkgs[pkg]; ok { // started, never ended: go test was killed
			pkgFailed++
			fmt.Fprintf(out, "FAIL %s\t(no result: go test stopped before the package ended)\n", pkg)
		}
	}
	summary := fmt.Sprintf("tests: %d passed, %d failed, %d skipped", passed, failed, skipped)
	if pkgFailed > 0 {
		summary += fmt.Sprintf(", %d packages failed", pkgFailed)
	}
	fmt.Fprintln(out, summary)
	if results == 0 && pkgFailed == 0 {
		fmt.Fprintln(errOut, "testreport: no package results read: go test failed before running any package (see its errors above)")
		return 1
	}
	if failed > 0 || pkgFailed > 0 {
		return 1
	}
	return 0
}
