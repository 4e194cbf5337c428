package configs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// manyKeys is a config file of format with n top-level keys, none of them drmas's.
func manyKeys(format string, n int) string {
	var sb strings.Builder
	switch format {
	case "json":
		sb.WriteString("{")
		for i := range n {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"k%d": %d`, i, i)
		}
		sb.WriteString("}")
	case "toml":
		for i := range n {
			fmt.Fprintf(&sb, "k%d = %d\n", i, i)
		}
	default:
		for i := range n {
			fmt.Fprintf(&sb, "k%d: %d\n", i, i)
		}
	}
	return sb.String()
}

// nested is a config file of format whose key a holds maps depth levels deep.
func nested(format string, depth int) string {
	switch format {
	case "json":
		return `{"a": ` + strings.Repeat(`{"a": `, depth) + "1" + strings.Repeat("}", depth) + "}"
	case "toml":
		return "a = " + strings.Repeat("{a = ", depth) + "1" + strings.Repeat("}", depth) + "\n"
	}
	return "a: " + strings.Repeat("{a: ", depth) + "1" + strings.Repeat("}", depth) + "\n"
}

// limitOf loads body as a file of format and returns the cap it was refused for.
func limitOf(t *testing.T, format, body string) *LimitError {
	t.Helper()
	_, err := Load(LoadOptions{File: write(t, "c."+format, body), LookupEnv: noEnv})
	var l *LimitError
	if !errors.As(err, &l) {
		t.Fatalf("%s of %d bytes: got %v, want a LimitError", format, len(body), err)
	}
	if strings.Count(err.Error(), "\n") != 0 || len(err.Error()) > 400 {
		t.Errorf("the refusal is not one short line: %q", err)
	}
	return l
}

func TestLimitsRefuseAtOnce(t *testing.T) {
	for _, format := range []string{"yaml", "json", "toml"} {
		t.Run(format, func(t *testing.T) {
			l := limitOf(t, format, manyKeys(format, MaxEntries+1))
			if l.What != "keys and list entries" || l.Max != MaxEntries {
				t.Errorf("keys: %v", l)
			}
			l = limitOf(t, format, nested(format, MaxDepth))
			if l.What != "levels of nesting" || !strings.HasPrefix(l.At, "a.a.a") {
				t.Errorf("depth: %v", l)
			}
			l = limitOf(t, format, nested(format, 5000)) // 553 s before the caps
			if l.What != "levels of nesting" {
				t.Errorf("depth 5000: %v", l)
			}
			l = limitOf(t, format, manyKeys(format, 40000)) // over the size cap first
			if l.What != "bytes" || l.Got <= MaxFileBytes {
				t.Errorf("size: %v", l)
			}
			long := strings.Repeat("x", MaxValueBytes+1)
			body := map[string]string{"yaml": "run: " + long + "\n", "json": `{"run": "` + long + `"}`, "toml": `run = "` + long + `"` + "\n"}[format]
			l = limitOf(t, format, body)
			if l.What != "bytes in a value" || l.At != "run" || l.Got != MaxValueBytes+1 {
				t.Errorf("value: %v", l)
			}
			key := strings.Repeat("k", MaxKeyBytes+1)
			body = map[string]string{"yaml": "models: {" + key + ": {}}\n", "json": `{"models": {"` + key + `": {}}}`, "toml": "[models." + key + "]\n"}[format]
			if l = limitOf(t, format, body); l.What != "bytes in a key" {
				t.Errorf("key: %v", l)
			}
		})
	}
}

// TestLimitsAliases: YAML aliases are counted as what they expand to, as decoding expands
// them: nine lines that stand for 10^9 entries are refused, not expanded.
func TestLimitsAliases(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&sb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	if l := limitOf(t, "yaml", sb.String()); l.What != "keys and list entries" {
		t.Errorf("aliases: %v", l)
	}
}

// TestLimitsAdmitRealConfigs: the example configs are far under every cap, and a file at the
// caps is read (and its unknown keys reported, the first MaxProblems of them).
func TestLimitsAdmitRealConfigs(t *testing.T) {
	_, err := Load(LoadOptions{File: write(t, "c.yaml", manyKeys("yaml", MaxEntries)), LookupEnv: noEnv})
	var l *LimitError
	if err == nil || errors.As(err, &l) {
		t.Fatalf("at the cap: %v", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != excerpt.MaxProblems+1 || lines[len(lines)-1] != fmt.Sprintf("and %d more problems", MaxEntries-excerpt.MaxProblems) {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !strings.Contains(lines[0], "unknown key k0") {
		t.Errorf("first: %q", lines[0])
	}
	if _, err := Load(LoadOptions{File: write(t, "c.yaml", nested("yaml", 0)), LookupEnv: noEnv}); err == nil || errors.As(err, &l) {
		t.Errorf("depth 2: %v", err)
	}
}

// TestLimitsOverrides: a DRMAS_* variable or a flag of megabytes is refused naming the cap,
// and a bad value is quoted as a short excerpt with its length.
func TestLimitsOverrides(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	env := func(k string) (string, bool) {
		if k == "DRMAS_RUN" {
			return huge, true
		}
		return "", false
	}
	_, err := Load(LoadOptions{LookupEnv: env})
	var l *LimitError
	if !errors.As(err, &l) || l.Source != "DRMAS_RUN" || l.Got != 10<<20 || len(err.Error()) > 300 {
		t.Fatalf("env: %.300v", err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("seed", "", "")
	_ = fs.Set("seed", strings.Repeat("9", 3000)+"x")
	_, err = Load(LoadOptions{Flags: fs, LookupEnv: noEnv})
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(3001 bytes)") {
		t.Fatalf("flag: %.400v", err)
	}
	long := strings.Repeat("r", 4000) // under the value cap, over the run name's 128 bytes
	_, err = Load(LoadOptions{File: write(t, "c.yaml", "run: "+long+"\n"), LookupEnv: noEnv})
	if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), "(4000 bytes)") {
		t.Fatalf("run: %.500v", err)
	}
}

// TestLoadCancelled: a cancelled load stops with the context's error.
func TestLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(LoadOptions{File: write(t, "c.yaml", "run: x\n"), LookupEnv: noEnv, Context: ctx})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// BenchmarkLoadKeys loads files of n unknown keys up to the cap: the time per key stays flat
// (ns/key) under the caps; before them 40,000 keys took 6 s, 12 times the time of 10,000.
func BenchmarkLoadKeys(b *testing.B) {
	for _, n := range []int{250, 500, 1000, MaxEntries} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(manyKeys("yaml", n)), 0o644); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				_, _ = Load(LoadOptions{File: path, LookupEnv: noEnv})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}
