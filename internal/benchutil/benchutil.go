// Package benchutil holds what the benchmark programs share: the Qwen2.5-0.5B shape as flags
// and the process's CPU time.
package benchutil

import (
	"flag"
	"math"
	"slices"
	"syscall"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// QwenShapeFlags registers -hidden, -layers, -heads, -kv-heads, -intermediate and -vocab on fs
// with hf.Qwen25Shape as defaults, and returns the spec they fill when fs is parsed.
func QwenShapeFlags(fs *flag.FlagSet) *hf.InitSpec {
	s := hf.Qwen25Shape
	fs.IntVar(&s.Hidden, "hidden", s.Hidden, "hidden size")
	fs.IntVar(&s.Layers, "layers", s.Layers, "layers")
	fs.IntVar(&s.Heads, "heads", s.Heads, "attention heads")
	fs.IntVar(&s.KVHeads, "kv-heads", s.KVHeads, "key/value heads")
	fs.IntVar(&s.Intermediate, "intermediate", s.Intermediate, "MLP width")
	fs.IntVar(&s.Vocab, "vocab", s.Vocab, "vocabulary")
	return &s
}

// Arch is the engine config of a spec: hf.NewConfig's config.json read back, as a folder of
// that shape would load.
func Arch(s *hf.InitSpec) (model.ArchConfig, error) {
	c, err := hf.NewConfig(*s)
	if err != nil {
		return model.ArchConfig{}, err
	}
	return c.ArchConfig(), nil
}

// CPUSeconds is the user and system CPU time this process has used (0 if unknown).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// Median is the middle of xs, the mean of the two middle values for an even count (NaN for
// none); xs is left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
