package engine

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu/ir"
)

// A parameter looked up by a name the model does not have fails the launches
// instead of silently using parameter 0.
func TestUnknownParameterName(t *testing.T) {
	m, seqs := smallCase(t)
	tr, err := New(interp(t), m)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !tr.has("ln_f.bias") || tr.has("blocks.0.attn.qkv.bias.nope") {
		t.Fatal("has: wrong answer")
	}
	l := tr.launcher()
	l.elementwise("bias_rows", 4, ir.ArgP(tr.w), ir.ArgP(tr.g), ir.ArgI(2))
	if l.err != nil {
		t.Fatalf("a plain launch failed: %v", l.err)
	}
	_ = tr.wp("blocks.0.attn.missing.weight")
	l.elementwise("bias_rows", 4, ir.ArgP(tr.w), ir.ArgP(tr.g), ir.ArgI(2))
	if l.err == nil || !strings.Contains(l.err.Error(), `no parameter "blocks.0.attn.missing.weight"`) {
		t.Fatalf("launch after an unknown name: %v", l.err)
	}
	// A fresh launcher starts clean: the trainer still works.
	if _, err := tr.Forward(m, seqs, 1); err != nil {
		t.Fatal(err)
	}
}
