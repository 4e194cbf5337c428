package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

func saveModel(t testing.TB, m *Model) []byte {
	var b bytes.Buffer
	if err := m.SaveSafetensors(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, tied := range []bool{true, false} {
		cfg := Config{Vocab: VocabSize, Context: 32, Dim: 16, Layers: 2, Heads: 2, FFMult: 2, TiedHead: tied}
		m, err := New(cfg, 42)
		if err != nil {
			t.Fatal(err)
		}
		data := saveModel(t, m)
		m2, err := LoadModel(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if m2.Config() != cfg {
			t.Fatalf("config %+v != %+v", m2.Config(), cfg)
		}
		for i, p := range m.Params() {
			q := m2.Params()[i]
			if p.Name != q.Name || !slices.Equal(p.Shape, q.Shape) {
				t.Fatalf("param %d: %s%v vs %s%v", i, p.Name, p.Shape, q.Name, q.Shape)
			}
			for j := range p.Data {
				if math.Float32bits(p.Data[j]) != math.Float32bits(q.Data[j]) {
					t.Fatalf("%s[%d] differs", p.Name, j)
				}
			}
		}
		if again := saveModel(t, m2); !bytes.Equal(again, data) {
			t.Fatal("re-saved bytes differ")
		}
		// Same seed ⇒ same bytes.
		m3, _ := New(cfg, 42)
		if !bytes.Equal(saveModel(t, m3), data) {
			t.Fatal("same seed gave different checkpoint bytes")
		}
		seqs := []Sequence{{Prompt: Encode("ab"), Response: Encode("cdef")}}
		a, _, _ := m.Score(seqs, 1)
		b, _, _ := m2.Score(seqs, 1)
		if !slices.Equal(a[0], b[0]) {
			t.Fatal("outputs differ after load")
		}
		ra, _ := m.Sample(context.Background(), []SampleRequest{{Prompt: []int32{BOS}, Seed: 3}}, SampleOptions{Temperature: 1, MaxTokens: 10})
		rb, _ := m2.Sample(context.Background(), []SampleRequest{{Prompt: []int32{BOS}, Seed: 3}}, SampleOptions{Temperature: 1, MaxTokens: 10})
		if !slices.Equal(ra[0].Tokens, rb[0].Tokens) || !slices.Equal(ra[0].LogProbs, rb[0].LogProbs) {
			t.Fatal("samples differ after load")
		}
	}
}

// TestSafetensorsLayoutIndependent parses the file with encoding/binary and
// encoding/json only (not ReadSafetensors) and checks the layout.
func TestSafetensorsLayoutIndependent(t *testing.T) {
	m, _ := New(Config{Vocab: VocabSize, Context: 16, Dim: 8, Layers: 1, Heads: 2, FFMult: 2}, 1)
	data := saveModel(t, m)
	n := binary.LittleEndian.Uint64(data[:8])
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	hdr := data[8 : 8+n]
	if strings.TrimRight(string(hdr), " ") != strings.TrimSpace(string(hdr)) || hdr[0] != '{' {
		t.Error("header must be JSON padded with trailing spaces")
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	var md map[string]string
	if err := json.Unmarshal(h["__metadata__"], &md); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	if err := json.Unmarshal([]byte(md["drmas.model_config"]), &cfg); err != nil || cfg != m.Config() {
		t.Fatalf("config metadata %q: %v", md["drmas.model_config"], err)
	}
	type entry struct {
		DType   string  `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	var names []string
	ents := map[string]entry{}
	for k, v := range h {
		if k == "__metadata__" {
			continue
		}
		var e entry
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		names = append(names, k)
		ents[k] = e
	}
	sort.Strings(names)
	if len(names) != len(m.Params()) {
		t.Fatalf("%d tensors, want %d", len(names), len(m.Params()))
	}
	var off int64
	params := map[string]Param{}
	for _, p := range m.Params() {
		params[p.Name] = p
	}
	for _, name := range names {
		e := ents[name]
		if e.DType != "F32" || e.Offsets[0] != off {
			t.Fatalf("%s: dtype %s offsets %v, want F32 starting at %d", name, e.DType, e.Offsets, off)
		}
		p := params[name]
		if !slices.Equal(p.Shape, e.Shape) || e.Offsets[1]-e.Offsets[0] != int64(4*len(p.Data)) {
			t.Fatalf("%s: shape %v span %d", name, e.Shape, e.Offsets[1]-e.Offsets[0])
		}
		raw := data[8+int64(n)+e.Offsets[0]:]
		for j, v := range p.Data {
			if binary.LittleEndian.Uint32(raw[4*j:]) != math.Float32bits(v) {
				t.Fatalf("%s[%d]: data mismatch", name, j)
			}
		}
		off = e.Offsets[1]
	}
	if int64(len(data)) != 8+int64(n)+off {
		t.Fatalf("file size %d, header+data %d", len(data), 8+int64(n)+off)
	}
	// Keys in the header appear in sorted order, __metadata__ first.
	idx := -1
	for _, name := range append([]string{"__metadata__"}, names...) {
		i := strings.Index(string(hdr), `"`+name+`":`)
		if i <= idx {
			t.Fatalf("key %q out of order", name)
		}
		idx = i
	}
}

func TestAdamWRoundTrip(t *testing.T) {
	m, _ := New(tinyConfig(false), 3)
	opt := NewAdamW(m, DefaultAdamWConfig())
	seqs := gradCheckSeqs()
	for step := 0; step < 3; step++ {
		p, _ := m.Forward(seqs, 1)
		g := m.NewGrads()
		d := make([][]float32, len(seqs))
		for i, s := range seqs {
			d[i] = slices.Repeat([]float32{-1}, len(s.Response))
		}
		if err := p.Backward(d, nil, g); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(g); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := opt.SaveSafetensors(&b); err != nil {
		t.Fatal(err)
	}
	o2, err := LoadAdamW(m, bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if o2.Steps != 3 || o2.AdamWConfig != opt.AdamWConfig || !slices.Equal(o2.mom, opt.mom) || !slices.Equal(o2.vel, opt.vel) {
		t.Fatal("optimizer state differs after load")
	}
	var b2 bytes.Buffer
	_ = o2.SaveSafetensors(&b2)
	if !bytes.Equal(b.Bytes(), b2.Bytes()) {
		t.Fatal("re-saved optimizer bytes differ")
	}
	other, _ := New(tinyConfig(true), 3)
	if _, err := LoadAdamW(other, bytes.NewReader(b.Bytes()), int64(b.Len())); err == nil {
		t.Fatal("loading optimizer state into a different config: want error")
	}
}

// stFile builds a safetensors file from a raw header and data.
func stFile(header string, data []byte) []byte {
	out := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

func corruptCases(t testing.TB) map[string][]byte {
	m, _ := New(Config{Vocab: VocabSize, Context: 8, Dim: 4, Layers: 1, Heads: 1, FFMult: 1}, 1)
	good := saveModel(t, m)
	huge := slices.Clone(good)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	eight := make([]byte, 8)
	return map[string][]byte{
		"empty":         {},
		"short":         {1, 2, 3},
		"truncated":     good[:len(good)-5],
		"truncatedHdr":  good[:40],
		"headerHuge":    huge,
		"headerZero":    eight,
		"par1":          []byte("PAR1PAR1PAR1PAR1"),
		"notJSON":       stFile("[1,2,3] ", nil),
		"badJSON":       stFile(`{"a":{"dtype":"F32",`, nil),
		"overlap":       stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)),
		"gap":           stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
		"uncovered":     stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)),
		"badDType":      stFile(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)),
		"shapeMismatch": stFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)),
		"negShape":      stFile(`{"a":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}}`, make([]byte, 16)),
		"hugeShape":     stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, nil),
		"outOfRange":    stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 8)),
		"negOffset":     stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, nil),
		"dupKey":        stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)),
		"unknownField":  stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, make([]byte, 4)),
		"badMetadata":   stFile(`{"__metadata__":{"k":1}}`, nil),
		"dupMetadata":   stFile(`{"__metadata__":{"k":"a","k":"b"}}`, nil),
		"nullMetaValue": stFile(`{"__metadata__":{"k":null}}`, nil),
		"trailing":      stFile(`{} x`, nil),
		"threeOffsets":  stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}`, make([]byte, 4)),
		"floatShape":    stFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, make([]byte, 4)),
	}
}

func TestReadSafetensorsRejectsCorrupt(t *testing.T) {
	for name, data := range corruptCases(t) {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSafetensors(bytes.NewReader(data), int64(len(data)))
			if err == nil {
				t.Fatal("want error")
			}
			t.Log(err)
			if _, err := LoadModel(bytes.NewReader(data), int64(len(data))); err == nil {
				t.Fatal("LoadModel: want error")
			}
		})
	}
	// Valid container, wrong contents for a model.
	for name, data := range map[string][]byte{
		"noConfig": stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)),
		"badConfig": func() []byte {
			var b bytes.Buffer
			_ = WriteSafetensors(&b, nil, map[string]string{MetaModelConfig: `{"vocab":1,"dim":-3}`})
			return b.Bytes()
		}(),
		"hugeConfig": func() []byte {
			var b bytes.Buffer
			_ = WriteSafetensors(&b, nil, map[string]string{MetaModelConfig: `{"vocab":264,"context":65536,"dim":16384,"layers":256,"heads":1,"ff_mult":64}`})
			return b.Bytes()
		}(),
		"missingTensor": func() []byte {
			m, _ := New(Config{Vocab: VocabSize, Context: 8, Dim: 4, Layers: 1, Heads: 1, FFMult: 1}, 1)
			cb, _ := json.Marshal(m.Config())
			var b bytes.Buffer
			_ = WriteSafetensors(&b, m.Tensors()[1:], map[string]string{MetaModelConfig: string(cb)})
			return b.Bytes()
		}(),
	} {
		if _, err := LoadModel(bytes.NewReader(data), int64(len(data))); err == nil {
			t.Errorf("%s: want error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestWriteSafetensorsValidates(t *testing.T) {
	bad := [][]Tensor{
		{{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}},
		{{Name: "a", DType: "X", Shape: []int{1}, Data: make([]byte, 4)}},
		{F32Tensor("a", []int{1}, []float32{1}), F32Tensor("a", []int{1}, []float32{1})},
		{F32Tensor("__metadata__", []int{1}, []float32{1})},
	}
	for i, ts := range bad {
		if err := WriteSafetensors(&bytes.Buffer{}, ts, nil); err == nil {
			t.Errorf("case %d: want error", i)
		}
	}
	// Input order and map order do not matter.
	md := map[string]string{"z": "1", "a": "2", "m": "3"}
	ts := []Tensor{F32Tensor("b", []int{2}, []float32{1, 2}), I64Tensor("a", []int{}, []int64{7}), F32Tensor("c", []int{0}, nil)}
	var b1, b2 bytes.Buffer
	_ = WriteSafetensors(&b1, ts, md)
	slices.Reverse(ts)
	_ = WriteSafetensors(&b2, ts, map[string]string{"m": "3", "a": "2", "z": "1"})
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("output depends on input order")
	}
	f, err := ReadSafetensors(bytes.NewReader(b1.Bytes()), int64(b1.Len()))
	if err != nil {
		t.Fatal(err)
	}
	at, _ := f.Tensor("a")
	v, err := at.Int64s()
	if err != nil || len(v) != 1 || v[0] != 7 {
		t.Fatalf("scalar I64: %v %v", v, err)
	}
	if f.Metadata["m"] != "3" || len(f.Tensors) != 3 {
		t.Fatalf("metadata/tensors: %v %v", f.Metadata, f.Tensors)
	}
}

// TestWriteFuzzSeeds keeps the checked-in seed corpus in sync (run with
// DRMAS_WRITE_FUZZ_SEEDS=1 to regenerate).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("DRMAS_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set DRMAS_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz seeds")
	}
	dir := filepath.Join("..", "safetensors", "testdata", "fuzz", "FuzzParse")
	m, _ := New(Config{Vocab: VocabSize, Context: 4, Dim: 2, Layers: 1, Heads: 1, FFMult: 1}, 1)
	cases := corruptCases(t)
	cases["valid_model"] = saveModel(t, m)
	var small bytes.Buffer
	_ = WriteSafetensors(&small, []Tensor{F32Tensor("w", []int{2, 2}, []float32{1, 2, 3, 4}), I64Tensor("step", []int{1}, []int64{5})}, map[string]string{"k": "v"})
	cases["valid_small"] = small.Bytes()
	for _, name := range []string{"valid_model", "valid_small", "overlap", "gap", "badDType", "shapeMismatch", "headerHuge", "par1", "truncated", "dupKey"} {
		body := "go test fuzz v1\n[]byte(" + quoteBytes(cases[name]) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func quoteBytes(b []byte) string {
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			s.WriteByte(c)
		default:
			s.WriteString(`\x`)
			s.WriteByte("0123456789abcdef"[c>>4])
			s.WriteByte("0123456789abcdef"[c&15])
		}
	}
	s.WriteByte('"')
	return s.String()
}

// FuzzLoadModel: any bytes given to LoadModel and LoadAdamW are refused with an error or load;
// the container's own fuzzing (safetensors.FuzzParse) holds the corpus.
func FuzzLoadModel(f *testing.F) {
	var b bytes.Buffer
	_ = WriteSafetensors(&b, []Tensor{F32Tensor("w", []int{2}, []float32{1, 2})}, map[string]string{"k": "v"})
	f.Add(b.Bytes())
	m, _ := New(Config{Vocab: VocabSize, Context: 4, Dim: 2, Layers: 1, Heads: 1, FFMult: 1}, 1)
	var mb bytes.Buffer
	_ = m.SaveSafetensors(&mb)
	f.Add(mb.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, err := LoadModel(bytes.NewReader(data), int64(len(data))); err == nil {
			_, _ = LoadAdamW(got, bytes.NewReader(data), int64(len(data)))
		}
	})
}

// TestLoadRejectsBadValues: checkpoints that are valid containers with the
// right layout but unusable contents (a NaN or Inf weight, a misspelt config
// key, optimizer hyper-parameters that turn every update into NaN, NaN or
// negative moments, no optimizer metadata) are refused with errors that name
// the problem.
func TestLoadRejectsBadValues(t *testing.T) {
	cfg := Config{Vocab: VocabSize, Context: 8, Dim: 4, Layers: 1, Heads: 1, FFMult: 1}
	m, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := json.Marshal(cfg)
	withWeight := func(v float32) []byte {
		bad := m.Clone()
		bad.Params()[3].Data[1] = v
		return saveModel(t, bad)
	}
	withConfig := func(c string) []byte {
		var b bytes.Buffer
		if err := WriteSafetensors(&b, m.Tensors(), map[string]string{MetaModelConfig: c}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"nan":        {withWeight(float32(math.NaN())), `tensor "blocks.0.ln1.bias": element 1 is NaN`},
		"inf":        {withWeight(float32(math.Inf(-1))), `element 1 is -Inf`},
		"unknownKey": {withConfig(strings.Replace(string(cb), `"tied_head"`, `"tied_hed"`, 1)), `unknown field "tied_hed"`},
		"trailing":   {withConfig(string(cb) + ` {}`), "trailing data"},
	} {
		if _, err := LoadModel(bytes.NewReader(tc.data), int64(len(tc.data))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadModel %s: error %v, want one containing %q", name, err, tc.want)
		}
	}

	opt := NewAdamW(m, DefaultAdamWConfig())
	for i := range opt.mom {
		opt.mom[i], opt.vel[i] = 0.01, 0.02
	}
	good := func(edit func(map[string]string, []Tensor)) []byte {
		var b bytes.Buffer
		if err := opt.SaveSafetensors(&b); err != nil {
			t.Fatal(err)
		}
		f, err := ReadSafetensors(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil {
			t.Fatal(err)
		}
		var ts []Tensor
		for _, ti := range f.Tensors {
			tt, _ := f.Tensor(ti.Name)
			ts = append(ts, tt)
		}
		edit(f.Metadata, ts)
		var out bytes.Buffer
		if err := WriteSafetensors(&out, ts, f.Metadata); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	setF32 := func(ts []Tensor, name string, v float32) {
		for i := range ts {
			if ts[i].Name == name {
				binary.LittleEndian.PutUint32(ts[i].Data, math.Float32bits(v))
				return
			}
		}
		t.Fatalf("no tensor %q", name)
	}
	adamw := func(js string) func(map[string]string, []Tensor) {
		return func(md map[string]string, _ []Tensor) { md[MetaAdamWConfig] = js }
	}
	unedited := good(func(map[string]string, []Tensor) {})
	if _, err := LoadAdamW(m, bytes.NewReader(unedited), int64(len(unedited))); err != nil {
		t.Fatalf("unedited optimizer state: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(map[string]string, []Tensor)
		want string
	}{
		"beta1":      {adamw(`{"lr":0.001,"beta1":1,"beta2":0.999,"eps":1e-8,"weight_decay":0}`), "beta1 1 out of range"},
		"eps":        {adamw(`{"lr":0.001,"beta1":0.9,"beta2":0.999,"eps":0,"weight_decay":0}`), "eps 0 must be"},
		"unknownKey": {adamw(`{"lr":0.001,"beta1":0.9,"beta2":0.999,"eps":1e-8,"weight_decy":0}`), `unknown field "weight_decy"`},
		"missing":    {func(md map[string]string, _ []Tensor) { delete(md, MetaAdamWConfig) }, `has no "drmas.adamw_config" metadata`},
		"nanMoment":  {func(_ map[string]string, ts []Tensor) { setF32(ts, "m.ln_f.bias", float32(math.NaN())) }, `tensor "m.ln_f.bias": element 0 is NaN`},
		"negSecond":  {func(_ map[string]string, ts []Tensor) { setF32(ts, "v.ln_f.bias", -1) }, `tensor "v.ln_f.bias": element 0 is -1, want ≥ 0`},
	} {
		data := good(tc.edit)
		if _, err := LoadAdamW(m, bytes.NewReader(data), int64(len(data))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadAdamW %s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestWriteSafetensorsRejectsInvalidUTF8: JSON would turn invalid bytes into
// U+FFFD, so two names differing only there would collide and the file would
// not read back; such names and metadata are refused instead.
func TestWriteSafetensorsRejectsInvalidUTF8(t *testing.T) {
	for name, tc := range map[string]struct {
		ts []Tensor
		md map[string]string
	}{
		"name":  {[]Tensor{F32Tensor("a\xff", []int{1}, []float32{1}), F32Tensor("a\xfe", []int{1}, []float32{2})}, nil},
		"key":   {nil, map[string]string{"k\xff": "v"}},
		"value": {nil, map[string]string{"k": "v\xff"}},
	} {
		if err := WriteSafetensors(&bytes.Buffer{}, tc.ts, tc.md); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: error %v, want one about UTF-8", name, err)
		}
	}
}

// TestTensorDecodeErrors: a wrong dtype and a ragged data length are told
// apart (the ragged case used to say "is F32, want F32").
func TestTensorDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		t    Tensor
		i64  bool
		want string
	}{
		{Tensor{Name: "a", DType: F32, Data: make([]byte, 6)}, false, "6 data bytes, not a multiple of 4"},
		{Tensor{Name: "a", DType: I64, Data: make([]byte, 8)}, false, "is I64, want F32"},
		{Tensor{Name: "b", DType: I64, Data: make([]byte, 12)}, true, "12 data bytes, not a multiple of 8"},
		{Tensor{Name: "b", DType: F32, Data: make([]byte, 8)}, true, "is F32, want I64"},
	} {
		var err error
		if tc.i64 {
			_, err = tc.t.Int64s()
		} else {
			_, err = tc.t.Float32s()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want one containing %q", tc.t.Name, tc.t.DType, err, tc.want)
		}
	}
}
