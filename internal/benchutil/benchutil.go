// Package benchutil holds what the benchmark programs share: the Qwen2.5-0.5B shape as flags
// and the process's CPU time.
package benchutil

import (
	"flag"
	"syscall"

	"github.com/drmas-dev/drmas/model"
)

// QwenShapeFlags registers -hidden, -layers, -heads, -kv-heads, -intermediate and -vocab on fs
// with the Qwen2.5-0.5B shape (tied head, RoPE θ 10⁶) as defaults, and returns the config they
// fill when fs is parsed.
func QwenShapeFlags(fs *flag.FlagSet) *model.ArchConfig {
	c := &model.ArchConfig{Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, Intermediate: 4864, Vocab: 151936,
		Context: 32768, RopeTheta: 1e6, Tie: true}
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "hidden size")
	fs.IntVar(&c.Layers, "layers", c.Layers, "layers")
	fs.IntVar(&c.Heads, "heads", c.Heads, "attention heads")
	fs.IntVar(&c.KVHeads, "kv-heads", c.KVHeads, "key/value heads")
	fs.IntVar(&c.Intermediate, "intermediate", c.Intermediate, "MLP width")
	fs.IntVar(&c.Vocab, "vocab", c.Vocab, "vocabulary")
	return c
}

// CPUSeconds is the user and system CPU time this process has used (0 if unknown).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
