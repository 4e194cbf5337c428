// Package stages holds what every pipeline stage shares: the environment a stage runs in
// (store, configuration, output writers). Each stage lives in its own sub-package
// (stages/rollout, stages/normalize, stages/learn, …) with a Run function that reads only
// committed inputs and commits its outputs under deterministic names, so any stage can be run
// alone, rerun, or resumed. Each Run names its stage once in the errors it returns ("normalize
// iter 3: …", an *Error made by Fail); the code inside a stage and the callers of Run (drmas
// run, drmas run-stage, ablate) do not add the stage's name again.
package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/filestore"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// Env is what a stage runs against.
type Env struct {
	Bucket storage.Bucket
	Config *configs.Config
	// Log receives one-line summaries (nil: discarded).
	Log io.Writer
	// Progress receives progress bars (nil: none).
	Progress io.Writer
}

// HF is what wiring the run's Hugging Face models needs of env: its configuration, its store
// credentials for base folders on another store, and its log.
func (e *Env) HF() *hfmodel.Env {
	return &hfmodel.Env{Config: e.Config, Logf: e.Logf, Open: func(ctx context.Context, src string) (storage.Bucket, error) {
		cfg := *e.Config // the S3 endpoint and credentials
		cfg.Store = src
		return OpenStore(ctx, &cfg)
	}}
}

// Logf writes a summary line to env.Log.
func (e *Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Warnf writes a warning line to env.Log.
func (e *Env) Warnf(format string, args ...any) { e.Logf("warning: "+format, args...) }

// Leftover turns the failed removal of a committed folder's receipts (commit.ErrReceiptsLeft)
// into a warning naming what (the stage and iteration), and returns nil for it: the folder is
// committed, so the stage succeeded. Any other error is returned unchanged.
func (e *Env) Leftover(what string, err error) error {
	if errors.Is(err, commit.ErrReceiptsLeft) {
		e.Warnf("%s: committed, but %s", what, explain(err)) // a delete the store keeps refusing: say what to check
		return nil
	}
	return err
}

// OpenStore opens the store cfg names.
func OpenStore(ctx context.Context, cfg *configs.Config) (storage.Bucket, error) {
	return client.Open(ctx, cfg.Store, s3store.Config{
		Endpoint:   cfg.S3.Endpoint,
		Region:     cfg.S3.Region,
		AccessKey:  cfg.S3.AccessKey,
		SecretKey:  cfg.S3.SecretKey,
		Insecure:   cfg.S3.Insecure,
		PathStyle:  cfg.S3.PathStyle,
		MaxRetries: cfg.S3.MaxRetries,
	})
}

// Error is a stage's failure, named once: every stage's exported Run returns its errors as an
// *Error whose message starts with what failed ("normalize iter 3", "evaluate step 2",
// "warmup"), and the code inside a stage does not repeat the stage's name. Callers that run
// stages (drmas run, ablate) add no prefix of their own for the stage.
type Error struct {
	What string // the stage and what it ran on: "learn iter 3"
	Err  error
	// Interrupted: the stage stopped because its context was cancelled (Ctrl-C, SIGTERM).
	Interrupted bool
}

func (e *Error) Error() string {
	if e.Interrupted {
		return e.What + ": interrupted (what was committed is kept): run the same command again to resume"
	}
	return e.What + ": " + explain(e.Err)
}

// explain is err's message, followed by what to do where hint knows it.
func explain(err error) string {
	if h := hint(err); h != "" {
		return err.Error() + ": " + h + ", then run the same command again (what was committed is kept)"
	}
	return err.Error()
}

// hint says what to check about an error of the store or a server, whose own message says
// only what failed: nothing for an error the stage explains itself.
func hint(err error) string {
	var ne *net.OpError
	var pe *fs.PathError
	switch {
	case errors.As(err, &ne) && ne.Addr != nil:
		return fmt.Sprintf("check that the server at %s is up and reachable", ne.Addr)
	case errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrPermission):
		// Opening a file or folder that exists (a committed part, an input file) needs read
		// access to it; creating or removing an entry (a folder, a Put's temporary file) needs
		// write access to the folder it is in.
		if pe.Op == "open" && !strings.HasPrefix(filepath.Base(pe.Path), filestore.TempPrefix) {
			return fmt.Sprintf("check that the user running drmas may read %s", pe.Path)
		}
		return fmt.Sprintf("check that the user running drmas may read and write %s", filepath.Dir(pe.Path))
	}
	return ""
}

func (e *Error) Unwrap() error { return e.Err }

// Fail names the stage that returned err (nil stays nil). An error that already names a stage
// (a stage run inside another) is returned unchanged, so no message names a stage twice. A
// cancellation of ctx reads as an interruption, not as "context canceled".
func Fail(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{What: what, Err: err, Interrupted: ctx.Err() != nil && errors.Is(err, context.Canceled)}
}

// IterName is how an error names a stage of one iteration: "normalize iter 3".
func IterName(stage string, iter int) string { return fmt.Sprintf("%s iter %d", stage, iter) }
