package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spf13/cobra"

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

// TestInterruptibleRunE: a command blocked in its work (a read that never returns) ends as soon
// as its context is cancelled, with one line that matches context.Canceled (exit 130).
func TestInterruptibleRunE(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	cmd := &cobra.Command{Use: "inspect", RunE: interruptibleRunE(func(*cobra.Command, []string) error { <-block; return nil })}
	ctx, cancel := context.WithCancel(context.Background())
	cmd.SetContext(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- cmd.RunE(cmd, nil) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || err.Error() != "inspect: interrupted: context canceled" {
			t.Fatalf("%v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not return when its context was cancelled")
	}
	cmd.SetContext(context.Background())
	want := errors.New("refused")
	if err := interruptibleRunE(func(*cobra.Command, []string) error { return want })(cmd, nil); err != want {
		t.Fatalf("the work's own error: %v", err)
	}
}
