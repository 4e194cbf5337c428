// Package progress draws progress bars for long stage work on a writer (normally stderr).
// A nil writer gives a silent bar, so library code can always report progress.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar reports progress of a known amount of work. Its methods may be called concurrently.
type Bar struct {
	mu    sync.Mutex // orders Add and Describe: a Describe never redraws a completed bar
	bar   *progressbar.ProgressBar
	start time.Time
}

// New starts a bar of total units described by desc, drawn on w (silent if w is nil or total
// is not positive).
func New(w io.Writer, total int64, desc, unit string) *Bar {
	if w == nil || total <= 0 {
		return &Bar{start: time.Now()}
	}
	b := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetWidth(24),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return &Bar{bar: b, start: time.Now()}
}

// Add advances the bar by n units.
func (b *Bar) Add(n int) {
	if b.bar != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		_ = b.bar.Add(n)
	}
}

// Describe changes the text before the bar (e.g. a running rate). Once the bar is complete
// it has ended its line, and Describe does nothing (redrawing it would print it a second time,
// without a line end).
func (b *Bar) Describe(s string) {
	if b.bar != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.bar.IsFinished() {
			b.bar.Describe(s)
		}
	}
}

// Finish completes the bar and returns the elapsed time.
func (b *Bar) Finish() time.Duration {
	if b.bar != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		_ = b.bar.Finish()
	}
	return time.Since(b.start)
}
