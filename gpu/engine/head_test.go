package engine

import (
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
