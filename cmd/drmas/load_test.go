package main

import (
	"context"
	"errors"
	"testing"

	"github.com/drmas-dev/drmas/configs"
)

// TestLoadInterruptibly: a cancelled load returns context.Canceled (main exits 130 on it), and
// an uncancelled one the config.
func TestLoadInterruptibly(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := loadInterruptibly(ctx, configs.LoadOptions{LookupEnv: noEnv}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	cfg, err := loadInterruptibly(context.Background(), configs.LoadOptions{LookupEnv: noEnv})
	if err != nil || cfg.Run == "" {
		t.Fatalf("%v %v", cfg, err)
	}
}
