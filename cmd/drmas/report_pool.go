package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/stages"
)

// openPool opens a session for each run of --pool in the same store and cache.
func openPool(cmd *cobra.Command, env *stages.Env, cache string, runs []string) ([]*analysis.Session, error) {
	var out []*analysis.Session
	for _, run := range runs {
		s, err := openRun(cmd, env, cache, run)
		if err != nil {
			closePool(out)
			return nil, fmt.Errorf("report --pool %s: %w", run, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// openRun opens a session of another run of env's store, in the same cache.
func openRun(cmd *cobra.Command, env *stages.Env, cache, run string) (*analysis.Session, error) {
	cfg := *env.Config
	cfg.Run = run
	return openSession(cmd, &stages.Env{Bucket: env.Bucket, Config: &cfg, Log: env.Log, Progress: env.Progress}, cache)
}

func closePool(ss []*analysis.Session) {
	for _, s := range ss {
		s.Close()
	}
}
