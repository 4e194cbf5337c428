package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// testModel is a small Qwen2 whose biases and norm weights are random too, so a misplaced
// tensor changes the decode, and whose projections are N(0, 0.15) rather than N(0, 0.02), so
// the greedy continuation varies instead of repeating one token.
func testModel(t testing.TB, tie bool) *model.LLM {
	t.Helper()
	c := model.ArchConfig{Arch: "qwen2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 128,
		Vocab: 512, Context: 256, RopeTheta: 1e6, Tie: tie}.WithDefaults()
	m, err := model.InitLLM(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	for _, p := range m.Params() {
		switch {
		case len(p.Shape) == 2 && !strings.Contains(p.Name, "embed"):
			for i := range p.Data {
				p.Data[i] = float32(r.NormFloat64() * 0.15)
			}
		case strings.HasSuffix(p.Name, ".bias"):
			for i := range p.Data {
				p.Data[i] = float32(r.NormFloat64() * 0.5)
			}
		case strings.Contains(p.Name, "norm"):
			for i := range p.Data {
				p.Data[i] = float32(1 + r.NormFloat64()*0.3)
			}
		}
	}
	return m
}

// ---- an independent reader, written from the GGUF specification ----

type readTensor struct {
	dims   []uint64
	typ    uint32
	offset uint64
}

type readFile struct {
	version uint32
	kv      map[string]any
	types   map[string]uint32
	tensors map[string]readTensor
	order   []string
	data    []byte // the data section
}

type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.b) {
		if r.err == nil {
			r.err = io.ErrUnexpectedEOF
		}
		return make([]byte, max(n, 0))
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) str() string { return string(r.take(int(r.u64()))) }
func (r *reader) val(typ uint32) any {
	switch typ {
	case 4:
		return r.u32()
	case 5:
		return int32(r.u32())
	case 6:
		return math.Float32frombits(r.u32())
	case 7:
		return r.take(1)[0] != 0
	case 8:
		return r.str()
	case 9:
		et, n := r.u32(), r.u64()
		out := make([]any, 0, min(n, 1<<20))
		for i := uint64(0); i < n && r.err == nil; i++ {
			out = append(out, r.val(et))
		}
		return out
	}
	r.err = fmt.Errorf("value type %d", typ)
	return nil
}

func parse(b []byte) (*readFile, error) {
	r := &reader{b: b}
	if string(r.take(4)) != "GGUF" {
		return nil, errors.New("bad magic")
	}
	f := &readFile{version: r.u32(), kv: map[string]any{}, types: map[string]uint32{}, tensors: map[string]readTensor{}}
	nt, nkv := r.u64(), r.u64()
	for i := uint64(0); i < nkv && r.err == nil; i++ {
		k := r.str()
		typ := r.u32()
		f.types[k] = typ
		f.kv[k] = r.val(typ)
	}
	for i := uint64(0); i < nt && r.err == nil; i++ {
		name := r.str()
		var x readTensor
		nd := r.u32()
		for j := uint32(0); j < nd; j++ {
			x.dims = append(x.dims, r.u64())
		}
		x.typ, x.offset = r.u32(), r.u64()
		f.tensors[name] = x
		f.order = append(f.order, name)
	}
	if r.err != nil {
		return nil, r.err
	}
	align := 32
	if a, ok := f.kv["general.alignment"].(uint32); ok {
		align = int(a)
	}
	start := (r.pos + align - 1) / align * align
	if start > len(b) {
		return nil, io.ErrUnexpectedEOF
	}
	f.data = b[start:]
	return f, nil
}

// floats decodes tensor name's elements as float32.
func (f *readFile) floats(t *testing.T, name string) []float32 {
	t.Helper()
	x, ok := f.tensors[name]
	if !ok {
		t.Fatalf("tensor %s missing", name)
	}
	n := uint64(1)
	for _, d := range x.dims {
		n *= d
	}
	size := map[uint32]uint64{0: 4, 30: 2}[x.typ]
	if x.offset%32 != 0 || x.offset+n*size > uint64(len(f.data)) {
		t.Fatalf("tensor %s: offset %d, %d bytes, data section %d bytes", name, x.offset, n*size, len(f.data))
	}
	raw := f.data[x.offset : x.offset+n*size]
	out := make([]float32, n)
	for i := range out {
		if x.typ == 30 {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		} else {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	return out
}

func write(t *testing.T, m *model.LLM, typ Type) []byte {
	t.Helper()
	v, err := ByteVocab(m.Config().Vocab)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(context.Background(), &buf, m, typ, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWriteParsesBack reads the writer's output with the reader above: the metadata llama.cpp
// needs, every tensor under its llama.cpp name with dimensions innermost first, F32 data bit
// for bit, BF16 matrices rounded to nearest even (vectors kept F32).
func TestWriteParsesBack(t *testing.T) {
	for _, tie := range []bool{false, true} {
		for _, typ := range []Type{F32, BF16} {
			t.Run(fmt.Sprintf("tie=%v/%v", tie, typ), func(t *testing.T) {
				m := testModel(t, tie)
				f, err := parse(write(t, m, typ))
				if err != nil {
					t.Fatal(err)
				}
				checkMetadata(t, f, m.Config(), typ)
				checkTensors(t, f, m, typ)
			})
		}
	}
}

func checkMetadata(t *testing.T, f *readFile, c model.ArchConfig, typ Type) {
	t.Helper()
	if f.version != 3 {
		t.Errorf("version %d", f.version)
	}
	want := map[string]any{
		"general.architecture":                   "qwen2",
		"general.file_type":                      map[Type]uint32{F32: 0, BF16: 32}[typ],
		"qwen2.context_length":                   uint32(256),
		"qwen2.embedding_length":                 uint32(64),
		"qwen2.block_count":                      uint32(2),
		"qwen2.feed_forward_length":              uint32(128),
		"qwen2.attention.head_count":             uint32(4),
		"qwen2.attention.head_count_kv":          uint32(2),
		"qwen2.attention.key_length":             uint32(16),
		"qwen2.rope.freq_base":                   float32(1e6),
		"qwen2.attention.layer_norm_rms_epsilon": float32(1e-6),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "qwen2",
		"tokenizer.ggml.eos_token_id":            uint32(511),
		"tokenizer.ggml.add_bos_token":           false,
	}
	for k, v := range want {
		if f.kv[k] != v {
			t.Errorf("%s = %#v, want %#v", k, f.kv[k], v)
		}
	}
	toks, _ := f.kv["tokenizer.ggml.tokens"].([]any)
	types, _ := f.kv["tokenizer.ggml.token_type"].([]any)
	merges, ok := f.kv["tokenizer.ggml.merges"].([]any)
	if len(toks) != c.Vocab || len(types) != c.Vocab || !ok || len(merges) != 0 {
		t.Fatalf("tokens %d, types %d, merges %v (%d): want %d, %d, an empty array", len(toks), len(types), ok, len(merges), c.Vocab, c.Vocab)
	}
	// Byte-level BPE spells the space byte 'Ġ' (U+0120) and 'A' as itself.
	if toks[' '] != "Ġ" || toks['A'] != "A" || toks[300] != "t300" || toks[511] != "<|endoftext|>" || types[511] != int32(3) || types[0] != int32(1) {
		t.Errorf("tokens: %q %q %q %q, types %v %v", toks[' '], toks['A'], toks[300], toks[511], types[511], types[0])
	}
}

func checkTensors(t *testing.T, f *readFile, m *model.LLM, typ Type) {
	t.Helper()
	if len(f.order) != len(m.Params()) {
		t.Fatalf("%d tensors, want %d", len(f.order), len(m.Params()))
	}
	_, hasOutput := f.tensors["output.weight"]
	if hasOutput == m.Config().Tie {
		t.Errorf("output.weight present %v with tied embeddings %v", hasOutput, m.Config().Tie)
	}
	for _, p := range m.Params() {
		name, err := TensorName(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		x := f.tensors[name]
		wantDims := []uint64{uint64(p.Shape[len(p.Shape)-1])}
		if len(p.Shape) == 2 {
			wantDims = append(wantDims, uint64(p.Shape[0]))
		}
		wantType := uint32(typ)
		if len(p.Shape) == 1 {
			wantType = 0
		}
		if !slices.Equal(x.dims, wantDims) || x.typ != wantType {
			t.Errorf("%s: dims %v type %d, want %v type %d", name, x.dims, x.typ, wantDims, wantType)
			continue
		}
		got := f.floats(t, name)
		for i, v := range p.Data {
			want := v
			if wantType == 30 {
				want = bf16Round(v)
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want)
			}
		}
	}
}

// bf16Round rounds to the nearest bfloat16 value, ties to even, by float64 arithmetic on the
// value (independent of the bit trick the writer uses).
func bf16Round(v float32) float32 {
	if v == 0 {
		return v
	}
	e := math.Floor(math.Log2(math.Abs(float64(v))))
	ulp := math.Pow(2, e-7) // 8 significant bits
	q := float64(v) / ulp
	r := math.RoundToEven(q)
	return float32(r * ulp)
}

func TestBF16RoundByHand(t *testing.T) {
	// 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even gives 1; 1 + 3·2^-8 lies
	// halfway between 1 + 2^-7 and 1 + 2^-6: ties to even gives 1 + 2^-6.
	for _, c := range [][2]float32{{1 + 1.0/256, 1}, {1 + 3.0/256, 1 + 1.0/64}, {-3.0 / 1024, -3.0 / 1024}} {
		if got := bf16Round(c[0]); got != c[1] {
			t.Errorf("bf16Round(%v) = %v, want %v", c[0], got, c[1])
		}
	}
}

func TestTensorNames(t *testing.T) {
	for hfName, want := range map[string]string{
		"model.embed_tokens.weight":                      "token_embd.weight",
		"lm_head.weight":                                 "output.weight",
		"model.norm.weight":                              "output_norm.weight",
		"model.layers.12.self_attn.k_proj.bias":          "blk.12.attn_k.bias",
		"model.layers.0.self_attn.o_proj.weight":         "blk.0.attn_output.weight",
		"model.layers.3.post_attention_layernorm.weight": "blk.3.ffn_norm.weight",
		"model.layers.1.mlp.down_proj.weight":            "blk.1.ffn_down.weight",
	} {
		if got, err := TensorName(hfName); err != nil || got != want {
			t.Errorf("TensorName(%q) = %q, %v; want %q", hfName, got, err, want)
		}
	}
	for _, bad := range []string{"model.layers.x.mlp.up_proj.weight", "model.layers.1.mlp.fc1.weight", "model.layers..mlp.up_proj.weight", "visual.proj"} {
		if _, err := TensorName(bad); !errors.Is(err, ErrUnsupported) {
			t.Errorf("TensorName(%q): err %v, want ErrUnsupported", bad, err)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	m := testModel(t, false)
	v, _ := ByteVocab(512)
	short, _ := ByteVocab(300)
	dup, _ := ByteVocab(512)
	dup.Tokens[400] = dup.Tokens[401]
	for name, c := range map[string]struct {
		typ Type
		v   Vocab
		msg string
	}{
		"vocab size":  {F32, short, "300 tokens"},
		"dup token":   {F32, dup, "both"},
		"tensor type": {Type(1), v, "not supported"},
	} {
		err := Write(context.Background(), io.Discard, m, c.typ, c.v)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want one naming %q", name, err, c.msg)
		}
	}
	q3, err := model.InitLLM(model.ArchConfig{Arch: "qwen3", Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, Intermediate: 64, Vocab: 512}.WithDefaults(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(context.Background(), io.Discard, q3, F32, v); !errors.Is(err, ErrUnsupported) {
		t.Errorf("qwen3: err %v, want ErrUnsupported", err)
	}
	if _, err := ByteVocab(100); err == nil {
		t.Error("ByteVocab(100) accepted")
	}
}

// TestWriteFileAtomic checks that a cancelled write leaves nothing under the path.
func TestWriteFileAtomic(t *testing.T) {
	m := testModel(t, false)
	v, _ := ByteVocab(512)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteFile(ctx, path, m, F32, v); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a cancelled write left %v", ents)
	}
	if err := WriteFile(context.Background(), path, m, F32, v); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, write(t, m, F32)) {
		t.Error("WriteFile and Write differ")
	}
}

// TestWriteStoredBF16: a model stored in BF16 (its matrices' bits, widened as they are
// written) gives the bytes of the same model in float32, in F32 and in BF16 files.
func TestWriteStoredBF16(t *testing.T) {
	for _, tie := range []bool{false, true} {
		m := testModel(t, tie)
		for _, p := range m.Params() {
			if len(p.Shape) == 2 {
				for i, v := range p.Data {
					p.Data[i] = hf.Float32FromBF16(hf.BF16FromFloat32(v))
				}
			}
		}
		h, err := m.FrozenBF16()
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []Type{F32, BF16} {
			if !bytes.Equal(write(t, m, typ), write(t, h, typ)) {
				t.Errorf("tie=%v, %v: the model stored in BF16 writes other bytes", tie, typ)
			}
		}
	}
}
