package learn

import (
	"fmt"
	"sync"

	"github.com/drmas-dev/drmas/configs"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
)

// deviceReserve is the device memory a plan leaves free beside the estimate: the CUDA
// context's later growth and the allocator's rounding, which the estimate does not count.
const deviceReserve = 256 << 20

// memInfo is a device that reports its memory (cuda.Device).
type memInfo interface {
	MemInfo() (free, total uint64, err error)
}

// deviceLLM is the GPU engine of an LLM on a device that reports its memory: its step is
// planned against that memory with gpu/engine's estimate (EstimateLLM), which counts the
// very buffers the engine allocates.
type deviceLLM struct {
	Engine
	m   *model.LLM
	mem memInfo
}

// DeviceMemoryError is a GPU that cannot hold one training step of a sequence of the
// configured length.
type DeviceMemoryError struct {
	Tokens      int   // prompt + response tokens of the sequence
	Need, Avail int64 // bytes
}

func (e *DeviceMemoryError) Error() string {
	return fmt.Sprintf("a training step of one sequence of %d tokens needs about %s of GPU memory, %s available: train a LoRA adapter (models.<id>.lora), lower rollout.max_tokens, or use a GPU with more memory",
		e.Tokens, configs.Bytes(float64(e.Need)), configs.Bytes(float64(e.Avail)))
}

// startLLM starts the GPU engine of m on d; on a device that reports its memory, a step of
// one sequence of the configured length must fit it (else a *DeviceMemoryError).
func startLLM(cfg *configs.Config, d gpuengine.Device, m *model.LLM) (Engine, func(), error) {
	t, err := gpuengine.NewLLM(d, m)
	if err != nil {
		return nil, nil, err
	}
	release := func() { _ = t.Close() }
	mi, ok := d.(memInfo)
	if !ok || cfg == nil {
		return GPULLMEngine(t), release, nil
	}
	e := deviceLLM{Engine: GPULLMEngine(t), m: m, mem: mi}
	need, avail, err := e.fit(cfg, 1)
	if err == nil && need > avail {
		p, r := hfmodel.StepShape(cfg, m.Config())
		err = &DeviceMemoryError{Tokens: p + r, Need: need, Avail: avail}
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return e, release, nil
}

// fit is the device memory a step of n sequences needs in all (weights included) and what
// this trainer may use: the free memory, what it holds already, less deviceReserve.
func (e deviceLLM) fit(cfg *configs.Config, n int) (need, avail int64, err error) {
	est, err := estimateSteps(cfg, e.m, n)
	if err != nil {
		return 0, 0, err
	}
	free, _, err := e.mem.MemInfo()
	if err != nil {
		return 0, 0, fmt.Errorf("gpu memory: %w", err)
	}
	return 4 * int64(est.Peak), int64(free) + 4*int64(est.Start) - deviceReserve, nil
}

// plan is the largest micro-batch of at most micro sequences whose step fits the device
// (at least 1), logging when it is smaller than micro: the rows then run in accumulation
// chunks of that size, the gradients of that micro_batch, bit for bit.
func (e deviceLLM) plan(cfg *configs.Config, id string, micro int, logf func(string, ...any)) stepPlan {
	fits := func(n int) bool {
		need, avail, err := e.fit(cfg, n)
		return err == nil && need <= avail
	}
	if micro <= 1 || fits(micro) {
		return stepPlan{micro: micro}
	}
	lo, hi := 1, micro // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if logf != nil {
		need, avail, _ := e.fit(cfg, micro)
		each, _, _ := e.fit(cfg, lo)
		logf("learner %s: a micro-batch of %d sequences needs about %s of GPU memory, %s available: training in accumulation chunks of %d (%s each)",
			id, micro, configs.Bytes(float64(need)), configs.Bytes(float64(avail)), lo, configs.Bytes(float64(each)))
	}
	return stepPlan{micro: lo}
}

// estimates holds EstimateLLM's results by architecture, parameter count and shape: a
// learner starts its engine every iteration, and an estimate runs the engine's host side.
var estimates sync.Map

// estimateSteps is gpu/engine's estimate for n sequences of the configured length on m.
func estimateSteps(cfg *configs.Config, m *model.LLM, n int) (gpuengine.DeviceMemory, error) {
	prompt, resp := hfmodel.StepShape(cfg, m.Config())
	key := fmt.Sprintf("%+v/%d/%d/%d/%d", m.Config(), m.NumParams(), n, prompt, resp)
	if v, ok := estimates.Load(key); ok {
		return v.(gpuengine.DeviceMemory), nil
	}
	seqs := make([]model.Sequence, n)
	for i := range seqs {
		seqs[i] = model.Sequence{Prompt: make([]int32, prompt), Response: make([]int32, resp)}
	}
	est, err := gpuengine.EstimateLLM(m, seqs)
	if err != nil {
		return est, fmt.Errorf("gpu memory estimate: %w", err)
	}
	estimates.Store(key, est)
	return est, nil
}
