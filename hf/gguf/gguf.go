// Package gguf writes a drmas model as a GGUF file, llama.cpp's format, so that llama.cpp can
// decode the very weights drmas decodes (the CPU decode anchor of `make bench-llamacpp`).
//
// A file is a header (magic "GGUF", version 3, tensor and key counts), typed key/value
// metadata, one record per tensor (name, dimensions innermost first, type, offset into the data
// section), then the tensors' bytes, each at an offset that is a multiple of Alignment. Only
// what llama.cpp needs to load a Qwen2 model is written: the architecture's hyperparameters, a
// tokenizer vocabulary and the tensors under llama.cpp's names.
package gguf

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/model"
)

// Type is a tensor's element type, numbered as ggml numbers them.
type Type uint32

// Tensor types written.
const (
	F32  Type = 0
	BF16 Type = 30
)

func (t Type) String() string {
	switch t {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// ParseType accepts f32 or bf16 (any case).
func ParseType(s string) (Type, error) {
	switch strings.ToLower(s) {
	case "f32":
		return F32, nil
	case "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("gguf: tensor type %q not supported (want f32 or bf16): %w", s, ErrUnsupported)
}

// fileType is general.file_type, llama.cpp's name for the dominant tensor type.
var fileType = map[Type]uint32{F32: 0, BF16: 32}

// Format constants.
const (
	Magic     = "GGUF"
	Version   = 3
	Alignment = 32
)

// Metadata value types, as the format numbers them.
const (
	tUint32  uint32 = 4
	tInt32   uint32 = 5
	tFloat32 uint32 = 6
	tBool    uint32 = 7
	tString  uint32 = 8
	tArray   uint32 = 9
)

// ErrUnsupported marks a model or option this writer cannot express.
var ErrUnsupported = errors.New("not supported")

// Write encodes m as GGUF with its matrices in t (norm weights and biases stay F32, as
// llama.cpp's converter keeps them) and v as the tokenizer. The context is checked before
// each tensor.
func Write(ctx context.Context, w io.Writer, m *model.LLM, t Type, v Vocab) error {
	c := m.Config()
	if err := check(c, t, v); err != nil {
		return err
	}
	tensors, err := tensorsOf(m.Params(), t)
	if err != nil {
		return err
	}
	e := &encoder{w: bufio.NewWriterSize(w, 1<<20)}
	kvs := append(archKVs(c, t), v.kvs()...)
	e.header(kvs, tensors)
	for _, x := range tensors {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.pad()
		e.data(x)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	return nil
}

// WriteFile writes the GGUF of m to path through a temporary file in the same folder, so a
// failed write leaves no partial file under path.
func WriteFile(ctx context.Context, path string, m *model.LLM, t Type, v Vocab) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".gguf-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = Write(ctx, f, m, t, v); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func check(c model.ArchConfig, t Type, v Vocab) error {
	if a, ok := model.LookupArch(c.Arch); !ok || a.GGUF == "" {
		return fmt.Errorf("gguf: architecture %q: only %s written: %w", c.Arch, strings.Join(ggufArchs(), ", "), ErrUnsupported)
	}
	if _, ok := fileType[t]; !ok {
		return fmt.Errorf("gguf: tensor type %v: %w", t, ErrUnsupported)
	}
	if len(v.Tokens) != c.Vocab {
		return fmt.Errorf("gguf: the vocabulary has %d tokens, the model's embedding %d rows: give a vocabulary of %d", len(v.Tokens), c.Vocab, c.Vocab)
	}
	return v.Validate()
}

// ggufArchs are the registered architectures with a GGUF name.
func ggufArchs() []string {
	var names []string
	for _, n := range model.ArchNames() {
		if a, _ := model.LookupArch(n); a.GGUF != "" {
			names = append(names, n)
		}
	}
	return names
}

// archKVs is the general and architecture metadata llama.cpp reads for a Qwen2 model.
func archKVs(c model.ArchConfig, t Type) []kv {
	arch, _ := model.LookupArch(c.Arch)
	a := arch.GGUF + "."
	return []kv{
		{"general.architecture", tString, arch.GGUF},
		{"general.name", tString, "drmas " + c.Arch},
		{"general.file_type", tUint32, fileType[t]},
		{"general.alignment", tUint32, uint32(Alignment)},
		{a + "context_length", tUint32, uint32(c.Context)},
		{a + "embedding_length", tUint32, uint32(c.Hidden)},
		{a + "block_count", tUint32, uint32(c.Layers)},
		{a + "feed_forward_length", tUint32, uint32(c.Intermediate)},
		{a + "attention.head_count", tUint32, uint32(c.Heads)},
		{a + "attention.head_count_kv", tUint32, uint32(c.KVHeads)},
		{a + "attention.key_length", tUint32, uint32(c.HeadDim)},
		{a + "attention.value_length", tUint32, uint32(c.HeadDim)},
		{a + "rope.freq_base", tFloat32, float32(c.RopeTheta)},
		{a + "attention.layer_norm_rms_epsilon", tFloat32, float32(c.RMSNormEps)},
	}
}

// kv is one metadata entry; val is a uint32, int32, float32, bool, string, []string or []int32
// as typ says (an array's element type follows from its Go type).
type kv struct {
	key string
	typ uint32
	val any
}

// tensor is one tensor as written: llama.cpp's name, dimensions innermost first, and the
// float32 data encoded as typ.
type tensor struct {
	name string
	dims []uint64
	typ  Type
	data []float32
	// bf16Rows, instead of data, gives a BF16-stored model's matrix in row-major order (a
	// copy made as the tensor is written, widened as it is encoded).
	bf16Rows func() []uint16
	offset   uint64
}

// count is the number of values.
func (x tensor) count() int {
	n := 1
	for _, d := range x.dims {
		n *= int(d)
	}
	return n
}

func (x tensor) size() uint64 {
	if x.typ == BF16 {
		return 2 * uint64(x.count())
	}
	return 4 * uint64(x.count())
}

// tensorsOf maps params to llama.cpp's tensors: matrices in t, vectors in F32; offsets are
// laid out aligned.
func tensorsOf(params []model.Param, t Type) ([]tensor, error) {
	out := make([]tensor, 0, len(params))
	var off uint64
	for _, p := range params {
		name, err := TensorName(p.Name)
		if err != nil {
			return nil, err
		}
		x := tensor{name: name, typ: t, data: p.Data}
		if p.BF16 != nil {
			x.bf16Rows = p.BF16Rows
		}
		if len(p.Shape) < 2 {
			x.typ = F32
		}
		for i := len(p.Shape) - 1; i >= 0; i-- {
			x.dims = append(x.dims, uint64(p.Shape[i]))
		}
		off = alignUp(off)
		x.offset = off
		off += x.size()
		out = append(out, x)
	}
	return out, nil
}

func alignUp(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

// blockNames maps a Hugging Face name inside model.layers.N to llama.cpp's inside blk.N.
var blockNames = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.o_proj.bias":           "attn_output.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
}

// topNames maps the tensors outside the blocks.
var topNames = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
}

// TensorName is llama.cpp's name for a Hugging Face tensor name of the Llama family.
func TensorName(hfName string) (string, error) {
	if n, ok := topNames[hfName]; ok {
		return n, nil
	}
	if rest, ok := strings.CutPrefix(hfName, "model.layers."); ok {
		layer, sub, _ := strings.Cut(rest, ".")
		if n, ok := blockNames[sub]; ok && layer != "" && strings.Trim(layer, "0123456789") == "" {
			return "blk." + layer + "." + n, nil
		}
	}
	return "", fmt.Errorf("gguf: no llama.cpp name for tensor %q: %w", hfName, ErrUnsupported)
}

// encoder writes little-endian values, keeping the first error and the byte count.
type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.n += uint64(len(b))
}

func (e *encoder) u32(v uint32) { e.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

// pad writes zeros up to the next multiple of Alignment.
func (e *encoder) pad() { e.bytes(make([]byte, alignUp(e.n)-e.n)) }

func (e *encoder) header(kvs []kv, tensors []tensor) {
	e.bytes([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, x := range kvs {
		e.str(x.key)
		e.u32(x.typ)
		e.value(x.val)
	}
	for _, x := range tensors {
		e.str(x.name)
		e.u32(uint32(len(x.dims)))
		for _, d := range x.dims {
			e.u64(d)
		}
		e.u32(uint32(x.typ))
		e.u64(x.offset)
	}
}

// value writes v's payload; arrays carry their element type and length.
func (e *encoder) value(v any) {
	switch v := v.(type) {
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		e.bytes([]byte{b})
	case string:
		e.str(v)
	case []string:
		e.u32(tString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []int32:
		e.u32(tInt32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	default:
		e.err = fmt.Errorf("gguf: metadata value of type %T", v)
	}
}

// data writes x's elements in x.typ, a buffer at a time.
func (e *encoder) data(x tensor) {
	var buf []byte
	var wide []float32
	var rows []uint16
	if x.bf16Rows != nil {
		rows = x.bf16Rows()
	}
	for i := 0; i < x.count() && e.err == nil; i += 1 << 16 {
		buf = buf[:0]
		vals := x.data
		if rows != nil {
			wide = wide[:0]
			for _, h := range rows[i:min(i+1<<16, len(rows))] {
				wide = append(wide, hf.Float32FromBF16(h))
			}
			vals = wide
		} else {
			vals = vals[i:min(i+1<<16, len(vals))]
		}
		for _, f := range vals {
			if x.typ == BF16 {
				buf = binary.LittleEndian.AppendUint16(buf, hf.BF16FromFloat32(f))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
		}
		e.bytes(buf)
	}
}
