// Command testreport reads `go test -json` events on stdin, prints each package's result line
// and the full output of every failing test, and ends with one summary line
// "tests: N passed, M failed, K skipped". It exits 1 if any test or package failed.
//
//	go test -json ./... | go run ./internal/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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
	var passed, failed, skipped, pkgFailed int
	output := map[string][]string{} // package/test → output lines, kept until the test ends
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // not an event (e.g. a build error): pass it through
			continue
		}
		key := e.Package + "/" + e.Test
		switch e.Action {
		case "build-output": // compiler errors of a package that failed to build
			fmt.Print(e.Output)
		case "output":
			output[key] = append(output[key], e.Output)
		case "pass", "fail", "skip":
			lines := output[key]
			delete(output, key)
			if e.Test == "" { // the package's result
				if e.Action == "fail" {
					pkgFailed++
					fmt.Print(strings.Join(lines, ""))
				}
				fmt.Printf("%-4s %s\t%.1fs\n", map[string]string{"pass": "ok", "fail": "FAIL", "skip": "?"}[e.Action], e.Package, e.Elapsed)
				continue
			}
			if strings.Contains(e.Test, "/") { // subtests are counted through their parents
				if e.Action == "fail" {
					fmt.Print(strings.Join(lines, ""))
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
				fmt.Print(strings.Join(lines, ""))
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed > 0 {
		if pkgFailed > 0 {
			fmt.Printf("%d packages failed\n", pkgFailed)
		}
		os.Exit(1)
	}
}
