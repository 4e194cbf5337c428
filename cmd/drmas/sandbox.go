package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/configs"
)

// sandboxHelp is what analyze --help says about --sandbox: which mode to use when.
const sandboxHelp = `

Your own SQL runs with the full power of DuckDB, as in the duckdb shell: COPY … TO a CSV file,
read_csv of any file, ATTACH, extensions. For SQL that someone else wrote (a shared notebook, a
service that passes queries on), use --sandbox (or analyze.sandbox: true in the config): the
query must be one SELECT, it sees only the run's views, DuckDB reads no file outside the run's
cache and writes none, attaches nothing, installs and loads no extension, and its settings are
locked; DuckDB's memory is capped at --memory-limit (default 1GiB) and a result at 1,000,000
rows. --timeout bounds a query's time in either mode.`

// sandboxOf is the sandbox analyze's SQL runs in: --sandbox, else the config's
// analyze.sandbox; nil for none. DuckDB's memory limit is --memory-limit when given.
func sandboxOf(cmd *cobra.Command, cfg *configs.Config) (*analysis.Sandbox, error) {
	on := cfg.Analyze.Sandbox
	if f := cmd.Flags().Lookup("sandbox"); f != nil && f.Changed {
		on = f.Value.String() == "true"
	}
	if !on {
		return nil, nil
	}
	sb := &analysis.Sandbox{}
	if f := cmd.Flags().Lookup("memory-limit"); f != nil && f.Value.String() != "" {
		n, err := parseBytes(f.Value.String())
		if err != nil {
			return nil, fmt.Errorf("--memory-limit %s: %w", f.Value.String(), err)
		}
		sb.MemoryLimit = int64(n)
	}
	return sb, nil
}

// withTimeout bounds ctx by --timeout (0: no bound).
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// timedOut names --timeout in the error of a query it stopped.
func timedOut(err error, ctx context.Context, timeout time.Duration) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the query ran past --timeout %s: narrow it (a WHERE, a LIMIT) or raise --timeout: %w", timeout, context.DeadlineExceeded)
	}
	return err
}
