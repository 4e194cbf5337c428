package main

import (
	"context"
	"fmt"

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
	type loaded struct {
		cfg *configs.Config
		err error
	}
	done := make(chan loaded, 1) // the load may finish after nobody waits: it must not block
	go func() {
		cfg, err := configs.Load(o)
		done <- loaded{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("loading the config: interrupted: %w", ctx.Err())
	}
}
