package hf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// tinyConfig is a small untied qwen2 (q/k/v biases, GQA) unless changed by edit.
func tinyConfig(t *testing.T, arch string, untied bool) Config {
	t.Helper()
	c, err := NewConfig(InitSpec{Arch: arch, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 24, Vocab: 40, Untied: untied, HeadDim: map[string]int{"qwen2": 4, "qwen3": 8}[arch]})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// edgeValues fills tensors with seeded values and, at the front of each, values that exercise
// rounding: ties, the dtype limits, subnormals, infinities and NaN.
func edgeValues(cfg Config, seed uint64) func(string) []float32 {
	rnd := RandomTensors(cfg, seed)
	edges := []float32{1, -1, 0, float32(math.Copysign(0, -1)), math.Float32frombits(0x3F808000), math.Float32frombits(0x3F818000),
		65504, 65520, 1e-7, math.Float32frombits(1), 3.4e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		1 + 1.0/2048, 1 + 3.0/2048, 0.1, -123.456}
	return func(name string) []float32 {
		v := rnd(name)
		for i := range v {
			v[i] *= 50 // spread over more exponents
		}
		copy(v, edges)
		return v
	}
}

func writeTestFolder(t *testing.T, cfg Config, dtype string, get func(string) []float32) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := WriteFolder(dir, cfg, dtype, get, filepath.Join("testdata", "tinytok")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// roundTo is what storing v in dtype must give back.
func roundTo(dtype string, v float32) float32 {
	switch dtype {
	case BF16:
		return Float32FromBF16(BF16FromFloat32(v))
	case F16:
		return Float32FromF16(F16FromFloat32(v))
	}
	return v
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestWriteReadRoundTrip: a folder written in each dtype reads back every tensor as the
// dtype's rounding of the values given, with the config and tokenizer files beside it, no
// other safetensors, and the same bytes when written again.
func TestWriteReadRoundTrip(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3"} {
		for _, dtype := range []string{BF16, F16, F32} {
			cfg := tinyConfig(t, arch, arch == "qwen2")
			get := edgeValues(cfg, 7)
			dir := writeTestFolder(t, cfg, dtype, get)
			w, err := OpenWeights(dir)
			if err != nil {
				t.Fatalf("%s %s: %v", arch, dtype, err)
			}
			if w.Config.TorchDtype != torchDtypes[dtype] || !slices.Equal(w.Dtypes(), []string{dtype}) {
				t.Errorf("%s: torch_dtype %q, dtypes %v", dtype, w.Config.TorchDtype, w.Dtypes())
			}
			for _, spec := range cfg.Tensors() {
				want := get(spec.Name)
				got := make([]float32, len(want))
				if err := w.Float32(spec.Name, got); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if !sameBits(got[i], roundTo(dtype, want[i])) {
						t.Fatalf("%s %s %s[%d]: %g (%08X), want %g", arch, dtype, spec.Name, i, got[i], math.Float32bits(got[i]), roundTo(dtype, want[i]))
					}
				}
				if loaded, err := w.Load(spec.Name); err != nil || !slices.EqualFunc(loaded, got, sameBits) {
					t.Fatalf("Load %s: %v", spec.Name, err)
				}
				if !slices.Equal(w.Shape(spec.Name), spec.Shape) || w.Dtype(spec.Name) != dtype {
					t.Errorf("%s: shape %v dtype %s", spec.Name, w.Shape(spec.Name), w.Dtype(spec.Name))
				}
			}
			if err := w.Float32(cfg.Tensors()[0].Name, make([]float32, 3)); err == nil {
				t.Error("a buffer of the wrong length accepted")
			}
			if err := w.Float32("model.nope", nil); err == nil || !strings.Contains(err.Error(), "model.nope") {
				t.Errorf("an unknown name: %v", err)
			}
			w.Close()
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			var names []string
			for _, f := range files {
				names = append(names, filepath.Base(f))
			}
			if !slices.Equal(names, []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
				t.Errorf("folder holds %v", names)
			}
			again := writeTestFolder(t, cfg, dtype, get)
			if fileHash(t, dir, SingleFile) != fileHash(t, again, SingleFile) || fileHash(t, dir, ConfigFile) != fileHash(t, again, ConfigFile) {
				t.Errorf("%s %s: writing again gives other bytes", arch, dtype)
			}
		}
	}
}

func fileHash(t *testing.T, dir, name string) [32]byte {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

func TestWriteFolderRefusesExisting(t *testing.T) {
	cfg := tinyConfig(t, "qwen3", false)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFolder(dir, cfg, "bf16", RandomTensors(cfg, 1), "")
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a folder with files: %v", err)
	}
	short := func(string) []float32 { return []float32{1} }
	empty := filepath.Join(dir, "new")
	if err := WriteFolder(empty, cfg, "bf16", short, ""); err == nil || !strings.Contains(err.Error(), "got 1 values") {
		t.Fatalf("short tensor: %v", err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed write left %s: %v", empty, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".new.tmp-*")); len(left) != 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}

// stFile assembles a safetensors file from a header text and data bytes.
func stFile(header string, data []byte) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

// TestLyingHeaders: each header that does not describe its file is refused with one line
// naming the tensor and what is wrong, without allocating what it claims.
func TestLyingHeaders(t *testing.T) {
	d16 := make([]byte, 16)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"header past the file", append(binary.LittleEndian.AppendUint64(nil, 1<<40), "{}"...), "the header claims 1099511627776 bytes"},
		{"not json", stFile("nonsense", nil), "not a JSON object"},
		{"garbage after", stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}xx`, d16), "data after its JSON object"},
		{"dtype", stFile(`{"a":{"dtype":"I8","shape":[16],"data_offsets":[0,16]}}`, d16), `tensor a has dtype "I8"`},
		{"shape", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}`, d16), "tensor a: shape [2] of F32 needs 8 bytes, data_offsets give 16"},
		{"huge shape", stFile(`{"a":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,16]}}`, d16), "needs 4000000000000 bytes"},
		{"overflowing shape", stFile(`{"a":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,16]}}`, d16), "shape [4294967296 4294967296] is too large"},
		{"offsets", stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[16]}}`, d16), "data_offsets [16] are not [begin, end]"},
		{"past the end", stFile(`{"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}}`, d16), "tensor a ends at 32, past the 16 data bytes"},
		{"overlap", stFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, d16), "tensor b overlaps"},
		{"gap", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, d16), "tensor b starts at 12, leaving a gap after 8"},
		{"trailing bytes", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, d16), "the tensors end at 8, but the file has 16 data bytes"},
		{"duplicate", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, d16), `lists "a" twice`},
		{"negative dim", stFile(`{"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}`, d16), "header entry \"a\""},
	}
	for _, c := range cases {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, err := parseSafetensors(bytes.NewReader(c.file), int64(len(c.file)), "f.safetensors")
		runtime.ReadMemStats(&ms)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if got := ms.TotalAlloc - before; got > 1<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte file", c.name, got, len(c.file))
		}
	}
	h, err := parseSafetensors(bytes.NewReader(stFile(`{"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]}}   `, d16)), 16+8+220, "ok")
	if err == nil {
		t.Errorf("a size that is not the file's accepted: %+v", h)
	}
	good := stFile(`{"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]}}   `, d16)
	h, err = parseSafetensors(bytes.NewReader(good), int64(len(good)), "ok")
	if err != nil || len(h.Tensors) != 3 || h.Metadata["format"] != "pt" || h.Tensors[0].Name != "a" || h.Tensors[0].Begin != int64(len(good)-16) {
		t.Errorf("a valid file: %+v %v", h, err)
	}
}

// writeST writes specs (values from get, or zeros where get has another size) as a safetensors file.
func writeST(t *testing.T, name string, specs []TensorSpec, dtype string, get func(string) []float32) {
	t.Helper()
	sizes := map[string]int64{}
	for _, s := range specs {
		sizes[s.Name] = s.Elements()
	}
	fit := func(name string) []float32 { // values of other shapes: zeros of the spec's
		if v := get(name); int64(len(v)) == sizes[name] {
			return v
		}
		return make([]float32, sizes[name])
	}
	var b bytes.Buffer
	if err := writeSafetensors(&b, specs, dtype, fit); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// folderWith writes cfg's config.json and one model.safetensors holding specs.
func folderWith(t *testing.T, cfg Config, specs []TensorSpec) string {
	t.Helper()
	dir := t.TempDir()
	js, _ := cfg.JSON()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	writeST(t, filepath.Join(dir, SingleFile), specs, BF16, RandomTensors(cfg, 1))
	return dir
}

func withSpec(specs []TensorSpec, drop string, add ...TensorSpec) []TensorSpec {
	var out []TensorSpec
	for _, s := range specs {
		if s.Name != drop {
			out = append(out, s)
		}
	}
	return append(out, add...)
}

// TestOpenWeightsArchitecture: a missing, misshapen or unexpected tensor is an error naming it;
// a tied model's extra lm_head.weight copy is accepted and ignored.
func TestOpenWeightsArchitecture(t *testing.T) {
	cfg := tinyConfig(t, "qwen3", false)
	specs := cfg.Tensors()
	get := RandomTensors(cfg, 1)
	misshapen := withSpec(specs, "model.norm.weight", TensorSpec{"model.norm.weight", []int{40, 16}})
	cases := []struct {
		specs []TensorSpec
		want  string
	}{
		{withSpec(specs, "model.layers.1.self_attn.k_norm.weight"), "tensor model.layers.1.self_attn.k_norm.weight is missing (qwen3 config.json has it, shape [8])"},
		{misshapen, "tensor model.norm.weight has shape [40 16], config.json says [16]"},
		{withSpec(specs, "", TensorSpec{"model.extra.weight", []int{40, 16}}), "tensor model.extra.weight is not part of a qwen3 model"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		js, _ := cfg.JSON()
		_ = os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644)
		writeST(t, filepath.Join(dir, SingleFile), c.specs, BF16, get)
		_, err := OpenWeights(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrFormat) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	tied := tinyConfig(t, "qwen3", false)
	tied.TieWordEmbeddings = true
	dir := folderWith(t, tied, append(tied.Tensors(), TensorSpec{"lm_head.weight", []int{40, 16}}))
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatalf("a tied model with an lm_head copy: %v", err)
	}
	if w.Dtype("lm_head.weight") != "" {
		t.Error("the tied copy is exposed")
	}
	w.Close()
	if _, err := OpenWeights(t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("an empty folder: %v", err)
	}
}

// TestShardedFolder: the tensors split over two shards with an index read as the single file
// does; an index that misplaces or omits a tensor is refused naming it.
func TestShardedFolder(t *testing.T) {
	cfg := tinyConfig(t, "qwen2", false)
	get := edgeValues(cfg, 3)
	single, err := OpenWeights(writeTestFolder(t, cfg, BF16, get))
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	specs := cfg.Tensors()
	shards := map[string][]TensorSpec{"model-00001-of-00002.safetensors": specs[:7], "model-00002-of-00002.safetensors": specs[7:]}
	write := func(edit func(map[string]string)) string {
		dir := t.TempDir()
		js, _ := cfg.JSON()
		_ = os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644)
		wm := map[string]string{}
		for file, ss := range shards {
			writeST(t, filepath.Join(dir, file), ss, BF16, get)
			for _, s := range ss {
				wm[s.Name] = file
			}
		}
		edit(wm)
		idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": wm})
		_ = os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
		return dir
	}
	w, err := OpenWeights(write(func(map[string]string) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(w.Files) != 2 {
		t.Errorf("files %v", w.Files)
	}
	for _, s := range specs {
		a, b := make([]float32, s.Elements()), make([]float32, s.Elements())
		if err := w.Float32(s.Name, a); err != nil {
			t.Fatal(err)
		}
		_ = single.Float32(s.Name, b)
		for i := range a {
			if !sameBits(a[i], b[i]) {
				t.Fatalf("%s[%d]: sharded %g, single %g", s.Name, i, a[i], b[i])
			}
		}
	}
	moved, kept := specs[0].Name, specs[8].Name
	for _, c := range []struct {
		edit func(map[string]string)
		want string
	}{
		{func(m map[string]string) { m[moved] = "model-00002-of-00002.safetensors" }, "tensor " + moved + " is here, but model.safetensors.index.json puts it in \"model-00002-of-00002.safetensors\""},
		{func(m map[string]string) { delete(m, kept) }, "tensor " + kept + " is here, but model.safetensors.index.json puts it in \"\""},
		{func(m map[string]string) { m["model.ghost"] = "model-00001-of-00002.safetensors" }, "tensor model.ghost is missing"},
		{func(m map[string]string) { m[moved] = "../other.safetensors" }, "not a .safetensors file of the folder"},
	} {
		if _, err := OpenWeights(write(c.edit)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestTokenizerInfo: the tiny tokenizer's counts, as written in testdata/tinytok.
func TestTokenizerInfo(t *testing.T) {
	info, err := ReadTokenizerInfo(filepath.Join("testdata", "tinytok"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Vocab != 264 || info.Added != 3 || info.MaxID != 266 || info.Model != "BPE" || VocabFor(info) != 320 {
		t.Errorf("%+v, vocab for it %d", info, VocabFor(info))
	}
	bos, eos := SpecialIDs(info)
	if !slices.Equal(bos, []int{264}) || !slices.Equal(eos, []int{266}) {
		t.Errorf("bos %v eos %v", bos, eos)
	}
}

// TestOpenWeightsMapsNotCopies: opening a 32 MiB folder and reading one small tensor allocates
// a small fraction of the file: the weights are mapped, not read into memory.
func TestOpenWeightsMapsNotCopies(t *testing.T) {
	cfg, err := NewConfig(InitSpec{Arch: "qwen3", Hidden: 256, Layers: 1, Heads: 4, KVHeads: 2, Intermediate: 256, Vocab: 65536})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeTestFolder(t, cfg, BF16, RandomTensors(cfg, 1))
	fi, err := os.Stat(filepath.Join(dir, SingleFile))
	if err != nil || fi.Size() < 32<<20 {
		t.Fatalf("file %v %v", fi, err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	norm := make([]float32, 256)
	if err := w.Float32("model.norm.weight", norm); err != nil || norm[0] != 1 {
		t.Fatalf("norm %v %v", norm[:2], err)
	}
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - before; got > 1<<20 {
		t.Errorf("opening a %d-byte folder allocated %d bytes", fi.Size(), got)
	}
}
