package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/configs"
)

// loadInterruptibly loads the config as configs.Load does, returning at once when ctx is
// cancelled (Ctrl-C, SIGTERM): the load stops itself between its steps, and a step already
// running is abandoned with the process, which exits 130 on the error returned here.
func loadInterruptibly(ctx context.Context, o configs.LoadOptions) (*configs.Config, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	o.Context = ctx
	return interruptibly(ctx, "loading the config", func() (*configs.Config, error) { return configs.Load(o) })
}

// interruptibly runs work and returns its result, or returns at once when ctx is cancelled
// with an error saying what was interrupted (main exits 130 on it). The work is abandoned
// with the process; it gets ctx too where it reads, so it usually stops by itself.
func interruptibly[T any](ctx context.Context, what string, work func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // the work may finish after nobody waits: it must not block
	go func() {
		v, err := work()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s: interrupted: %w", what, ctx.Err())
	}
}

// interruptibleRunE is run as a command's RunE that Ctrl-C and SIGTERM end at once, exit 130
// and one line, even while it reads a file or computes.
func interruptibleRunE(run func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		_, err := interruptibly(ctx, cmd.CommandPath(), func() (struct{}, error) { return struct{}{}, run(cmd, args) })
		return err
	}
}
