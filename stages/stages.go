// Package stages holds what every pipeline stage shares: the environment a stage runs in
// (store, configuration, output writers). Each stage lives in its own sub-package
// (stages/rollout, stages/normalize, stages/learn, …) with a Run function that reads only
// committed inputs and commits its outputs under deterministic names, so any stage can be run
// alone, rerun, or resumed.
package stages

import (
	"context"
	"fmt"
	"io"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
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

// Logf writes a summary line to env.Log.
func (e *Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
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
