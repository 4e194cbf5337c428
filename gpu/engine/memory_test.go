package engine

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

// allocLog is a Device that records the words of every allocation and the most words live at
// once since the log was last reset.
type allocLog struct {
	Device
	sizes            map[ir.Ptr]int
	live, peak, most int // words live now, most live at once, largest allocation
}

func newAllocLog(d Device) *allocLog { return &allocLog{Device: d, sizes: map[ir.Ptr]int{}} }

func (a *allocLog) Alloc(words int) (ir.Ptr, error) {
	p, err := a.Device.Alloc(words)
	if err == nil {
		a.sizes[p] = words
		a.live += words
		a.peak, a.most = max(a.peak, a.live), max(a.most, words)
	}
	return p, err
}

func (a *allocLog) Free(p ir.Ptr) error {
	a.live -= a.sizes[p]
	delete(a.sizes, p)
	return a.Device.Free(p)
}

// reset starts a new record from the buffers live now.
func (a *allocLog) reset() { a.peak, a.most = a.live, 0 }

// TestHeadChunksBoundMemory: with the head in chunks of 2 scored rows, no buffer a pass
// allocates (forward and backward) reaches [scored rows × vocab] words and the logits and
// probabilities take 2 × vocab words each; with the default (one chunk for so few rows) the
// logits take every scored row, so the bound is the chunking's doing. The passes' results are
// TestLLMMatchesCPU's.
func TestHeadChunksBoundMemory(t *testing.T) {
	c := model.ArchConfig{Hidden: 16, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24, Vocab: 2000, Context: 32}
	m := randLLM(t, "qwen3", c)
	seqs := long(c.Vocab, [2]int{3, 4}, [2]int{6, 2}, [2]int{1, 1})
	const scored = 7
	for _, rows := range []int{2, 0} {
		log := newAllocLog(interp(t))
		lt, err := NewLLM(log, m)
		if err != nil {
			t.Fatal(err)
		}
		lt.t.headRows = rows
		log.reset()
		p, err := lt.Forward(m, seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(p.LogProbs(), p.Entropy(), m.NewGrads()); err != nil {
			t.Fatal(err)
		}
		logits, probs := lt.t.bufs["logits"].words, lt.t.bufs["probs"].words
		t.Logf("head rows %d: logits %d words, probs %d, largest pass buffer %d, pass peak %d words (scored × vocab %d)",
			rows, logits, probs, log.most, log.peak-2*lt.t.total, scored*c.Vocab)
		switch rows {
		case 2:
			if logits != 2*c.Vocab || probs != 2*c.Vocab {
				t.Errorf("chunks of 2 rows: logits %d, probs %d words, want %d", logits, probs, 2*c.Vocab)
			}
			if log.most >= scored*c.Vocab {
				t.Errorf("chunks of 2 rows: a pass buffer of %d words, not below scored × vocab %d", log.most, scored*c.Vocab)
			}
		case 0:
			if logits != scored*c.Vocab {
				t.Errorf("one chunk: logits %d words, want %d", logits, scored*c.Vocab)
			}
		}
		if err := lt.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHeadChunkRows: a chunk's logits stay within HeadChunkWords (441 rows of Qwen's 151,936
// tokens), at least one row for any vocabulary.
func TestHeadChunkRows(t *testing.T) {
	for _, tc := range []struct{ vocab, rows int }{{151936, 441}, {40, 1 << 26 / 40}, {1 << 27, 1}} {
		if got := HeadChunkRows(tc.vocab); got != tc.rows {
			t.Errorf("HeadChunkRows(%d) = %d, want %d", tc.vocab, got, tc.rows)
		}
	}
}

// TestAttnBlocksBoundMemory: with attention in blocks of 2 query rows over sequences of 12 and
// 5 rows, the device's attention scratch is the largest block's maps (4 heads × 2 rows × 12
// keys = 96 words, the last block of the long sequence; its scores and their gradient, 2 ×
// 96 words) and no layer keeps maps; by default (blocks of 256) it is the whole maps, 4 ×
// (12² + 5²) = 676 words. The passes' results are TestLLMMatchesCPU's.
func TestAttnBlocksBoundMemory(t *testing.T) {
	m := tinyLLM(t, "qwen3", false)
	seqs := long(40, [2]int{5, 8}, [2]int{2, 4})
	for _, tc := range []struct{ rows, words int }{{2, 96}, {0, 676}} {
		lt, err := NewLLM(interp(t), m)
		if err != nil {
			t.Fatal(err)
		}
		lt.attnRows = tc.rows
		p, err := lt.Forward(m, seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
		b := lt.t.bufs
		t.Logf("blocks of %d rows (0: AttnBlockRows): %d blocks, attention scratch %d + %d words", tc.rows, len(p.attn.blocks), b["attBlk"].words, b["dPBlk"].words)
		if b["attBlk"].words != tc.words || b["dPBlk"].words != tc.words {
			t.Errorf("blocks of %d rows: scratch %d and %d words, want %d", tc.rows, b["attBlk"].words, b["dPBlk"].words, tc.words)
		}
		for name := range b {
			if strings.HasSuffix(name, ".att") || name == "dP" {
				t.Errorf("blocks of %d rows: buffer %s kept", tc.rows, name)
			}
		}
		if err := lt.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEstimateLLMMatchesAllocations: EstimateLLM's peak is the most words the engine keeps
// allocated at once on the interpreter over NewLLM, Forward and Backward (the same buffers,
// counted without running a kernel), with default settings and with head chunks of 2 rows
// and attention blocks of 2 rows, which it finds smaller; its Params is the weights and the
// gradient buffer, its Start what a started trainer holds.
func TestEstimateLLMMatchesAllocations(t *testing.T) {
	c := model.ArchConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 12, Intermediate: 24, Vocab: 500, Context: 32}
	m := randLLM(t, "qwen3", c)
	seqs := long(c.Vocab, [2]int{5, 8}, [2]int{2, 4}, [2]int{3, 0})
	peaks := map[int]int{}
	for _, rows := range []int{0, 2} {
		tune := func(lt *LLMTrainer) { lt.t.headRows, lt.attnRows = rows, rows }
		est, err := estimateLLM(m, seqs, tune)
		if err != nil {
			t.Fatal(err)
		}
		log := newAllocLog(interp(t))
		lt, err := NewLLM(log, m)
		if err != nil {
			t.Fatal(err)
		}
		started := log.live
		tune(lt)
		p, err := lt.Forward(m, seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
		t.Logf("head and attention rows %d: estimate %+v words, interpreter peak %d", rows, est, log.peak)
		if est.Peak != log.peak || est.Start != started || est.Params != 2*len(m.NewGrads().Flat()) {
			t.Errorf("rows %d: estimate %+v, interpreter peak %d words, %d after NewLLM, parameters %d", rows, est, log.peak, started, len(m.NewGrads().Flat()))
		}
		peaks[rows] = est.Peak
		if err := lt.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if peaks[2] >= peaks[0] {
		t.Errorf("chunks and blocks of 2 rows: peak %d words, not below the default's %d", peaks[2], peaks[0])
	}
}
