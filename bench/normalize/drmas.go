package main

import (
	"context"
	"time"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// runDrmas runs the normalize stage (estimator drmas) over the committed iteration in store.
func runDrmas(ctx context.Context, store string) (phaseResult, error) {
	b, err := filestore.New(store)
	if err != nil {
		return phaseResult{}, err
	}
	cfg := configs.Default()
	cfg.Run = runName
	cfg.Store = store
	env := &stages.Env{Bucket: b, Config: cfg}
	start := time.Now()
	res, err := normalize.Run(ctx, env, normalize.Options{Iteration: iter, Estimators: []string{"drmas"}})
	wall := time.Since(start)
	if err != nil {
		return phaseResult{}, err
	}
	return phaseResult{Engine: "drmas", Rows: res.Rows, WallS: wall.Seconds()}, nil
}
