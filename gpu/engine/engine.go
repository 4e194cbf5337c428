// Package engine is the GPU learner: it runs the model's forward and backward passes (the
// same math as model.Forward and model.Pass.Backward) with the kernels of gpu/kernels on a
// Device, which is a GPU (gpu/cuda) or, in tests, the CPU interpreter of gpu/ir.
//
// What the package promises:
//
//   - Same results as the CPU engine within float32 tolerance: per-token log-probs and
//     entropies from Forward, gradients from Backward accumulated into a *model.Grads, for
//     the same weights and batch. Tests check this against model.Model through the
//     interpreter on every machine, and on the GPU where one exists.
//   - The host *model.Model and *model.AdamW stay the source of truth for checkpoints. The
//     Trainer uploads a model's weights before a Forward when the model changed (another
//     model, or MarkDirty after an optimizer step on the host). With the device optimizer
//     (Grads, Pass.BackwardInto, Step) gradients, norms, clipping and AdamW stay on the
//     device, and Sync copies the updated weights and moments back; Step is
//     model.AdamW.Step's arithmetic bit for bit.
//   - Deterministic: the kernels use no atomics and fixed reduction orders, so a batch gives
//     the same bits run to run on the same GPU and driver. They are not the CPU engine's bits
//     (different summation orders and exp/log approximations).
//   - Batch independence: sequences are packed as in the CPU engine and attention never
//     crosses sequences; every activation GEMM element is one sequential FMA chain, so a
//     sequence's log-probs and entropies do not depend on the rest of the batch. Weight
//     gradients, sums over the batch's rows, may be split along the rows into chunks whose
//     partial products are added in chunk order (split-K, for small weight matrices that
//     would leave SMs idle): deterministic, but their bits depend on the batch size.
//   - Sizes: the kernels index device words with int32, so Forward refuses (with the reason)
//     a batch whose activations, attention maps or logits would exceed that, and New a model
//     with more parameters; the learner then needs smaller micro-batches.
//
// A Pass is valid until the next Forward on the same Trainer (activations live in reused
// device buffers). A Trainer is not safe for concurrent use.
package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
)

// Device is what the Trainer needs from a GPU: word-addressed buffers (4-byte words) and
// kernel launches by name. *cuda.Device and *ir.Interp implement it.
type Device interface {
	Alloc(words int) (ir.Ptr, error)
	Free(p ir.Ptr) error
	WriteF32(dst ir.Ptr, src []float32) error
	WriteI32(dst ir.Ptr, src []int32) error
	ReadF32(dst []float32, src ir.Ptr) error
	Zero(p ir.Ptr, words int) error
	Launch(name string, grid, block [3]int, args ...ir.Arg) error
	Sync() error
}

type devBuf struct {
	p     ir.Ptr
	words int
}

// Trainer holds one model's weights and gradients on a device.
type Trainer struct {
	dev    Device
	cfg    model.Config
	off    []int // word offset of each parameter
	sizes  []int
	total  int
	w, g   ir.Ptr
	idx    map[string]int
	src    *model.Model
	dirty  bool
	bufs   map[string]devBuf
	host   []float32
	closed bool
	gen    int // Forward calls so far: a Pass is valid while gen is its own
	times  Timings
	// bigBlocks is the fewest TileBig blocks for which a plain GEMM uses the TileBig kernel
	// (see bigGemm); tests lower it to run the large kernels at small shapes.
	bigBlocks int
	// lookupErr records the first parameter name looked up (index) that the model does
	// not have: the launcher then refuses every launch instead of running on parameter 0.
	lookupErr error
	// splitBlocks: a weight-gradient GEMM with fewer Tile blocks than this is split along k
	// (see splits); 0 never splits. splitMinK is the fewest k a chunk gets.
	splitBlocks, splitMinK int
	splitTabs              map[splitKey]ir.Ptr // split-K tables on the device, by shape
	grads                  map[*Grads]struct{} // live device gradients, freed by Close
	// The device optimizer (Step): opt's moments are at mom and vel, as of opt.Steps ==
	// optSteps; ahead says the device's weights and moments are newer than the host's.
	opt      *model.AdamW
	optSteps int64
	mom, vel ir.Ptr
	ahead    bool
	// headRows is the most scored rows one output-head chunk covers (0: as many as keep a
	// chunk's logits within HeadChunkWords); tests lower it to run chunks that straddle
	// sequences. headKept is the gen of the pass whose only chunk's logits and
	// probabilities are still in the buffers (0: none), which the backward then reuses.
	headRows, headKept int
	// attnRows is the most query rows of a sequence one attention block of the built-in
	// model's pass covers (0: AttnBlockRows); tests lower it to run several blocks a sequence.
	attnRows int
}

// HeadChunkWords bounds the logits of one output-head chunk (and, as much again, its
// probabilities): 2^26 float32 words, 256 MiB, so a pass never holds [tokens × vocabulary].
const HeadChunkWords = 1 << 26

// HeadChunkRows is how many scored rows one output-head chunk of a vocabulary of vocab tokens
// covers: as many as keep the chunk's logits within HeadChunkWords, at least 1.
func HeadChunkRows(vocab int) int { return max(1, HeadChunkWords/max(vocab, 1)) }

// headChunk is the rows of the trainer's head chunks for a vocabulary of vocab tokens.
func (t *Trainer) headChunk(vocab int) int {
	if t.headRows > 0 {
		return t.headRows
	}
	return HeadChunkRows(vocab)
}

// maxWords bounds every device buffer and element count: the kernels index words with int32
// (addresses are base + 4·index with a signed 32-bit index), and a launch's last block or
// chunk may compute indices up to 2^16 past its end.
const maxWords = math.MaxInt32 - 1<<16

// maxRows bounds the rows (tokens) of a pass: a GEMM over them has ceil(rows/Tile) blocks in
// grid y, at most 65535.
const maxRows = 65535 * kernels.Tile

// DefaultBigGemmBlocks is Trainer's default for when a GEMM uses the TileBig kernel: two
// resident blocks on each of the 132 SMs of an H100/H200, so that no SM idles.
const DefaultBigGemmBlocks = 2 * 132

// Timings are the wall-clock times a Trainer spent, summed since the last ResetTimings. Every
// phase ends with a device-to-host copy or waits for the device, so each includes its
// kernels.
type Timings struct {
	Upload   time.Duration // weights to the device
	Forward  time.Duration // Forward, log-probs and entropies back on the host
	Backward time.Duration // Backward (gradients back and added on the host) or BackwardInto
	// Optimizer is the device optimizer: gradient norms, sums and clipping (Grads) and Step.
	Optimizer time.Duration
	Download  time.Duration // Sync: weights and moments back to the host
}

// Timings returns the times since the last ResetTimings.
func (t *Trainer) Timings() Timings { return t.times }

// ResetTimings zeroes the Timings.
func (t *Trainer) ResetTimings() { t.times = Timings{} }

// New allocates a Trainer for models shaped like m on dev and uploads m's weights.
func New(dev Device, m *model.Model) (*Trainer, error) {
	c := m.Config()
	if c.Vocab > 65535 || c.Context > 65535 {
		return nil, fmt.Errorf("gpu engine: vocab %d or context %d above 65535 (grid limit)", c.Vocab, c.Context)
	}
	t, err := newTrainer(dev, m.Params())
	if err != nil {
		return nil, err
	}
	t.cfg = c
	if err := t.upload(m); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// newTrainer lays out params (in order) in a weight and a gradient buffer on dev.
func newTrainer(dev Device, params []model.Param) (*Trainer, error) {
	t := &Trainer{dev: dev, idx: map[string]int{}, bufs: map[string]devBuf{}, bigBlocks: DefaultBigGemmBlocks,
		splitBlocks: DefaultBigGemmBlocks, splitMinK: 256, splitTabs: map[splitKey]ir.Ptr{}, grads: map[*Grads]struct{}{}}
	for i, p := range params {
		t.off = append(t.off, t.total)
		n := len(p.Data) + len(p.BF16) // a model stored in BF16 is uploaded widened
		t.sizes = append(t.sizes, n)
		t.idx[p.Name] = i
		t.total += n
	}
	if t.total > maxWords {
		return nil, fmt.Errorf("gpu engine: %d parameters above the kernels' int32 indexing (%d words)", t.total, maxWords)
	}
	var err error
	if t.w, err = dev.Alloc(t.total); err != nil {
		return nil, fmt.Errorf("gpu engine: weights: %w", err)
	}
	if t.g, err = dev.Alloc(t.total); err != nil {
		_ = dev.Free(t.w)
		return nil, fmt.Errorf("gpu engine: gradients: %w", err)
	}
	return t, nil
}

// Close frees every device buffer of the Trainer, its Grads included. Updates from Step not
// yet Synced are lost.
func (t *Trainer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for _, b := range t.bufs {
		errs = append(errs, t.dev.Free(b.p))
	}
	for g := range t.grads {
		errs = append(errs, t.dev.Free(g.p))
		g.p = 0
	}
	errs = append(errs, t.dev.Free(t.w))
	if t.g != 0 { // a LoRATrainer frees its base's gradients at the start
		errs = append(errs, t.dev.Free(t.g))
	}
	for _, p := range []ir.Ptr{t.mom, t.vel} {
		if p != 0 {
			errs = append(errs, t.dev.Free(p))
		}
	}
	t.bufs, t.grads = nil, nil
	return errors.Join(errs...)
}

// matches reports whether g is laid out like the Trainer's model: the gradients of a model of
// its config. (Checking tensor 0 alone let a gradient of a model with other layers through:
// its tensors were indexed past their end, or received the gradients of other parameters.)
func (t *Trainer) matches(g *model.Grads) bool { return g != nil && g.Config() == t.cfg }

// MarkDirty says the host weights changed (an optimizer step on the host): the next Forward
// uploads them. While the device holds newer weights from Step, that Forward fails instead.
func (t *Trainer) MarkDirty() { t.dirty = true }

func (t *Trainer) upload(m *model.Model) error {
	start := time.Now()
	defer func() { t.times.Upload += time.Since(start) }()
	if m.Config() != t.cfg {
		return fmt.Errorf("gpu engine: model config differs from the trainer's")
	}
	if err := t.writeParams(m.Params()); err != nil {
		return err
	}
	t.src, t.dirty = m, false
	return nil
}

// writeParams copies params (laid out as newTrainer's) into the device's weights.
func (t *Trainer) writeParams(params []model.Param) error {
	for i, p := range params {
		if err := t.dev.WriteF32(t.w.Add(t.off[i]), p.Float32()); err != nil {
			return fmt.Errorf("gpu engine: upload %s: %w", p.Name, err)
		}
	}
	return nil
}

// readScores waits for the launches of l and copies the pass's log-probs and entropies back.
func (t *Trainer) readScores(l *launcher, logp, ent []float32, logpP, entP ir.Ptr) error {
	if l.err != nil {
		return l.err
	}
	if err := t.dev.ReadF32(logp, logpP); err != nil {
		return fmt.Errorf("gpu engine: read log-probs: %w", err)
	}
	if err := t.dev.ReadF32(ent, entP); err != nil {
		return fmt.Errorf("gpu engine: read entropies: %w", err)
	}
	return nil
}

// buf returns the device buffer called name with room for words words, reusing it when it
// is large enough.
func (t *Trainer) buf(name string, words int) (ir.Ptr, error) {
	words = max(words, 1)
	if words > maxWords { // every device buffer, whatever Pass.checkSizes knows of
		return 0, fmt.Errorf("gpu engine: %s needs %d words, above the kernels' int32 indexing (%d)", name, words, maxWords)
	}
	if b, ok := t.bufs[name]; ok {
		if b.words >= words {
			return b.p, nil
		}
		if err := t.dev.Free(b.p); err != nil {
			return 0, err
		}
		delete(t.bufs, name)
	}
	p, err := t.dev.Alloc(words)
	if err != nil {
		return 0, fmt.Errorf("gpu engine: alloc %s (%d words): %w", name, words, err)
	}
	t.bufs[name] = devBuf{p, words}
	return p, nil
}

func (t *Trainer) wp(name string) ir.Ptr { return t.w.Add(t.off[t.index(name)]) }

// index returns the position of the named parameter. A name the model does not have is
// recorded in lookupErr (the launcher then fails) and yields 0.
func (t *Trainer) index(name string) int {
	i, ok := t.idx[name]
	if !ok && t.lookupErr == nil {
		t.lookupErr = fmt.Errorf("gpu engine: the model has no parameter %q", name)
	}
	return i
}

// has reports whether the model has the named parameter (biases are optional).
func (t *Trainer) has(name string) bool {
	_, ok := t.idx[name]
	return ok
}

// launcher collects the first error of a sequence of launches.
type launcher struct {
	dev Device
	err error
	t   *Trainer // nil (AdamStep): no TileBig or split-K GEMMs, whose settings and buffers are t's
}

func (t *Trainer) launcher() *launcher {
	t.lookupErr = nil
	return &launcher{dev: t.dev, t: t}
}

// bigGemm says whether the TileBig kernel computes an m×n product: when it has at least
// l.t.bigBlocks blocks and pads the product by at most 1/8 of its area (both kernels give the
// same bits, so the choice only decides speed: 8×8 outputs a thread load half the shared
// memory per FMA of 4×4, but four times fewer blocks can leave SMs idle, and a 128-wide tile
// pads a 259-column head GEMM by half).
func (l *launcher) bigGemm(m, n int) bool {
	if l.t == nil || l.t.bigBlocks <= 0 {
		return false
	}
	bm, bn := ceil(m, kernels.TileBig), ceil(n, kernels.TileBig)
	return bm*bn >= l.t.bigBlocks && 8*bm*bn*kernels.TileBig*kernels.TileBig <= 9*m*n
}

// keep returns b, recording err as the launcher's first error (later launches are skipped).
func (l *launcher) keep(b ir.Ptr, err error) ir.Ptr {
	if err != nil && l.err == nil {
		l.err = err
	}
	return b
}

func (l *launcher) launch(name string, grid, block [3]int, args ...ir.Arg) {
	if l.err == nil && l.t != nil && l.t.lookupErr != nil {
		l.err = l.t.lookupErr
	}
	if l.err != nil {
		return
	}
	if err := l.dev.Launch(name, grid, block, args...); err != nil {
		l.err = fmt.Errorf("gpu engine: %s: %w", name, err)
	}
}

func ceil(a, b int) int { return (a + b - 1) / b }

func (l *launcher) elementwise(name string, total int, args ...ir.Arg) {
	if total == 0 {
		return
	}
	args = append(args, ir.ArgI(total))
	l.launch(name, [3]int{ceil(total, kernels.RowThreads), 1, 1}, [3]int{kernels.RowThreads, 1, 1}, args...)
}

// gemm runs C[m×n] = alpha·op(A)·op(B) + beta·C (row-major, leading dimensions in words).
func (l *launcher) gemm(ta, tb bool, m, n, k int, alpha float32, a ir.Ptr, lda int, b ir.Ptr, ldb int, beta float32, c ir.Ptr, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	name, tile := kernels.GemmName(ta, tb, false), kernels.Tile
	if l.bigGemm(m, n) {
		name, tile = kernels.GemmBigName(ta, tb), kernels.TileBig
	}
	l.launch(name,
		[3]int{ceil(n, tile), ceil(m, tile), 1}, [3]int{kernels.GemmThreads, kernels.GemmThreads, 1},
		ir.ArgP(a), ir.ArgP(b), ir.ArgP(c), ir.ArgI(m), ir.ArgI(n), ir.ArgI(k), ir.ArgI(lda), ir.ArgI(ldb), ir.ArgI(ldc), ir.ArgF(alpha), ir.ArgF(beta))
}

// maxSplits bounds the k-chunks of a split-K GEMM.
const maxSplits = 16

// splits is the number of k-chunks for a weight-gradient GEMM of m×n×k: 1 (no split) when
// the product already has l.t.splitBlocks Tile blocks, otherwise enough chunks for twice that
// many blocks, each at least l.t.splitMinK deep, at most maxSplits. A weight gradient is a
// sum over the batch's rows (k), so its bits depend on the batch anyway; activation GEMMs are
// never split, so a sequence's log-probs stay independent of the rest of the batch.
func (l *launcher) splits(m, n, k int) int {
	if l.t == nil || l.t.splitBlocks <= 0 {
		return 1
	}
	blocks := ceil(m, kernels.Tile) * ceil(n, kernels.Tile)
	if blocks >= l.t.splitBlocks {
		return 1
	}
	return max(1, min(ceil(2*l.t.splitBlocks, blocks), k/l.t.splitMinK, maxSplits))
}

// gemmW is gemm for weight gradients (k runs over the batch's rows): when splits says so, the
// k range is cut into chunks whose partial products one batched GEMM writes to a workspace and
// splitk_sum adds up in chunk order, with beta·C, so the result is deterministic; otherwise
// it is gemm.
func (l *launcher) gemmW(ta, tb bool, m, n, k int, alpha float32, a ir.Ptr, lda int, b ir.Ptr, ldb int, beta float32, c ir.Ptr, ldc int) {
	s := l.splits(m, n, k)
	if s <= 1 || l.err != nil || m == 0 || n == 0 {
		l.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	chunk := ceil(ceil(k, s), kernels.TileK) * kernels.TileK
	s = ceil(k, chunk)
	tab, err := l.t.splitTable(ta, tb, m, n, k, lda, ldb, chunk)
	if err != nil {
		l.err = err
		return
	}
	part := l.keep(l.t.buf("splitk", s*m*n))
	l.gemmBatched(ta, tb, batch{tab: tab, n: s, maxM: m, maxN: n}, alpha, 0, a, b, part)
	l.elementwise("splitk_sum", m*n, ir.ArgP(part), ir.ArgP(c), ir.ArgI(s), ir.ArgI(n), ir.ArgI(ldc), ir.ArgF(beta), ir.ArgI(m*n))
}

// splitKey is the shape a split-K table depends on.
type splitKey struct {
	ta, tb                   bool
	m, n, k, lda, ldb, chunk int
}

// splitTable returns the device table of a split-K GEMM (one batched-GEMM entry per k-chunk,
// its partial product at chunk·m·n words of the workspace), uploading it on first use; the
// tables depend only on the shape, so a pass uploads each once (the layers share them), and
// dropSplitTables frees those of other batch sizes.
func (t *Trainer) splitTable(ta, tb bool, m, n, k, lda, ldb, chunk int) (ir.Ptr, error) {
	key := splitKey{ta, tb, m, n, k, lda, ldb, chunk}
	if p, ok := t.splitTabs[key]; ok {
		return p, nil
	}
	var tab []int32
	for s, k0 := 0, 0; k0 < k; s, k0 = s+1, k0+chunk {
		aOff, bOff := k0, k0*ldb // A is m×k, B is k×n, row-major
		if ta {
			aOff = k0 * lda // A stored k×m
		}
		if tb {
			bOff = k0 // B stored n×k
		}
		tab = append(tab, int32(m), int32(n), int32(min(chunk, k-k0)), int32(aOff), int32(bOff), int32(s*m*n), int32(lda), int32(ldb), int32(n))
	}
	p, err := t.buf(splitTableName(key), len(tab))
	if err != nil {
		return 0, err
	}
	if err := t.dev.WriteI32(p, tab); err != nil {
		return 0, fmt.Errorf("gpu engine: upload a split-K table: %w", err)
	}
	t.splitTabs[key] = p
	return p, nil
}

// dropSplitTables frees the split-K tables whose k (a batch's rows) is none of the row counts
// of the pass about to run (n rows, m scored in head chunks of a vocabulary of vocab tokens),
// so that a Trainer holds one pass's tables however many batch sizes it sees (a table per
// shape, kept for the Trainer's life, grew with every new size).
func (t *Trainer) dropSplitTables(n, m, vocab int) error {
	c := min(t.headChunk(vocab), max(m, 1))
	for key, p := range t.splitTabs {
		if key.k == n || key.k == m || key.k == c || key.k == m%c {
			continue
		}
		delete(t.splitTabs, key)
		delete(t.bufs, splitTableName(key))
		if err := t.dev.Free(p); err != nil {
			return fmt.Errorf("gpu engine: free a split-K table: %w", err)
		}
	}
	return nil
}

func splitTableName(key splitKey) string { return fmt.Sprintf("splitk table %v", key) }

// batch is one batched-GEMM table on the device.
type batch struct {
	tab        ir.Ptr
	n          int
	maxM, maxN int
}

func (l *launcher) gemmBatched(ta, tb bool, bt batch, alpha, beta float32, a, b, c ir.Ptr) {
	if bt.n == 0 {
		return
	}
	l.launch(kernels.GemmName(ta, tb, true),
		[3]int{ceil(bt.maxN, kernels.Tile), ceil(bt.maxM, kernels.Tile), bt.n}, [3]int{kernels.GemmThreads, kernels.GemmThreads, 1},
		ir.ArgP(a), ir.ArgP(b), ir.ArgP(c), ir.ArgP(bt.tab), ir.ArgF(alpha), ir.ArgF(beta))
}

// colSum adds the column sums of x[n×d] (times y when y != 0) to out.
func (t *Trainer) colSum(l *launcher, x, y ir.Ptr, n, d int, out ir.Ptr) {
	if n == 0 || l.err != nil {
		return
	}
	chunks := ceil(n, kernels.ColChunk)
	part, err := t.buf("colsum", chunks*d)
	if err != nil {
		l.err = err
		return
	}
	grid := [3]int{ceil(d, kernels.RowThreads), chunks, 1}
	block := [3]int{kernels.RowThreads, 1, 1}
	if y != 0 {
		l.launch("colsum2_part", grid, block, ir.ArgP(x), ir.ArgP(y), ir.ArgP(part), ir.ArgI(n), ir.ArgI(d))
	} else {
		l.launch("colsum_part", grid, block, ir.ArgP(x), ir.ArgP(part), ir.ArgI(n), ir.ArgI(d))
	}
	l.elementwise("colsum_final", d, ir.ArgP(part), ir.ArgP(out), ir.ArgI(chunks), ir.ArgI(d))
}

// AdamStep runs model.AdamW.Step's arithmetic on one tensor of n words on the device (p, g
// and the moments mom, vel), for callers that keep the optimizer state on the device; the
// learner keeps it on the host.
func AdamStep(dev Device, p, g, mom, vel ir.Ptr, n int, decay, b1, b2, step, invBc2, eps float32) error {
	l := &launcher{dev: dev}
	l.elementwise("adamw", n, ir.ArgP(p), ir.ArgP(g), ir.ArgP(mom), ir.ArgP(vel),
		ir.ArgF(decay), ir.ArgF(b1), ir.ArgF(b2), ir.ArgF(step), ir.ArgF(invBc2), ir.ArgF(eps))
	return l.err
}

// checkSeqs is model.checkSeqs: the same validation, so the GPU engine rejects what the CPU
// engine rejects.
func checkSeqs(c model.Config, seqs []model.Sequence, temperature float32) error {
	if !(temperature > 0) || math.IsInf(float64(temperature), 0) {
		return fmt.Errorf("gpu engine: temperature %v must be > 0", temperature)
	}
	for i, s := range seqs {
		if len(s.Response) > 0 && len(s.Prompt) == 0 {
			return fmt.Errorf("gpu engine: sequence %d: empty prompt", i)
		}
		if len(s.Prompt)+len(s.Response) > c.Context {
			return fmt.Errorf("gpu engine: sequence %d: length %d exceeds context %d", i, len(s.Prompt)+len(s.Response), c.Context)
		}
		for _, part := range [][]int32{s.Prompt, s.Response} {
			for _, tok := range part {
				if tok < 0 || int(tok) >= c.Vocab {
					return fmt.Errorf("gpu engine: sequence %d: token %d out of range [0,%d)", i, tok, c.Vocab)
				}
			}
		}
	}
	return nil
}
