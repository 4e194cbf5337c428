package hf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/internal/regular"
)

// Weight file names of a Hugging Face folder.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// maxIndexBytes bounds an index: it maps names to files.
const maxIndexBytes = 64 << 20

// Weights are the tensors of an open model folder, checked against its config.
type Weights struct {
	Config  Config
	Files   []string // the safetensors files, base names, sorted
	tensors map[string]tensorInfo
	maps    map[string][]byte // file → its mapped bytes
	release []func() error
}

// OpenWeights opens the folder's config.json and its weights: model.safetensors, else the shards
// model.safetensors.index.json names. Every header is validated, and the tensors must be
// exactly those of the config's architecture (Config.Tensors) with their shapes; a tied model's
// checkpoint may also hold lm_head.weight of the embedding's shape, which is ignored.
func OpenWeights(dir string) (*Weights, error) {
	return OpenWeightsContext(context.Background(), dir)
}

// OpenWeightsContext is OpenWeights with reads that ctx cancels.
func OpenWeightsContext(ctx context.Context, dir string) (*Weights, error) {
	cfg, err := ReadConfigContext(ctx, dir)
	if err != nil {
		return nil, err
	}
	w := &Weights{Config: cfg, tensors: map[string]tensorInfo{}, maps: map[string][]byte{}}
	files, index, err := weightFiles(ctx, dir)
	if err == nil {
		err = w.openFiles(ctx, dir, files, index)
	}
	if err == nil {
		err = w.checkArchitecture(filepath.Join(dir, files[0]))
	}
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

// weightFiles returns the safetensors files of dir and, for a sharded folder, the index's map
// of tensor → file.
func weightFiles(ctx context.Context, dir string) ([]string, map[string]string, error) {
	single := filepath.Join(dir, SingleFile)
	if err := regular.Check(single); err == nil {
		return []string{SingleFile}, nil, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fileErr(single, err)
	}
	name := filepath.Join(dir, IndexFile)
	data, err := readBounded(ctx, name, maxIndexBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, formatErr(dir, fmt.Sprintf("no %s or %s", SingleFile, IndexFile))
	}
	if err != nil {
		return nil, nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, nil, formatErr(name, "not an index: "+err.Error())
	}
	if len(idx.WeightMap) == 0 {
		return nil, nil, formatErr(name, "weight_map is missing or empty")
	}
	var files []string
	seen := map[string]bool{} // a set: the index may have 100,000s of entries
	for tensor, file := range idx.WeightMap {
		if file != filepath.Base(file) || strings.ContainsAny(file, `/\`) || !strings.HasSuffix(file, ".safetensors") || file == ".safetensors" {
			return nil, nil, formatErr(name, fmt.Sprintf("tensor %s is in %s, not a .safetensors file of the folder", excerpt.Quote(tensor), excerpt.Quote(file)))
		}
		if !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
	}
	sort.Strings(files)
	return files, idx.WeightMap, nil
}

// readBounded reads the regular file name, at most limit bytes, in reads ctx cancels.
func readBounded(ctx context.Context, name string, limit int64) ([]byte, error) {
	data, err := regular.ReadFile(ctx, name, limit)
	if err != nil {
		return nil, fileErr(name, err)
	}
	return data, nil
}

// fileErr is the error for reading name: a file too large or not a regular file is a format
// error naming it (matching ErrFormat); other errors keep their own (os.ErrNotExist, ctx's).
func fileErr(name string, err error) error {
	var nr *regular.NotRegularError
	var tl *regular.TooLargeError
	switch {
	case errors.As(err, &nr):
		return &Error{File: name, Msg: nr.Kind + ", not a regular file", Err: ErrFormat}
	case errors.As(err, &tl):
		return formatErr(name, fmt.Sprintf("more than %d bytes", tl.Limit))
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return err // a *PathError: it names the file
	}
	return fmt.Errorf("read %s: %w", name, err)
}

// openFiles maps and validates each file; with an index, each tensor must be in the file the
// index names.
func (w *Weights) openFiles(ctx context.Context, dir string, files []string, index map[string]string) error {
	for _, file := range files {
		name := filepath.Join(dir, file)
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := w.mapOne(name, file)
		if err != nil {
			return err
		}
		for _, t := range h.Tensors {
			if index != nil && index[t.Name] != file {
				return formatErr(name, fmt.Sprintf("tensor %s is here, but %s puts it in %s", excerpt.Name(t.Name), IndexFile, excerpt.Quote(index[t.Name])))
			}
			if old, dup := w.tensors[t.Name]; dup {
				return formatErr(name, fmt.Sprintf("tensor %s is also in %s", excerpt.Name(t.Name), filepath.Base(old.Source)))
			}
			w.tensors[t.Name] = t
		}
	}
	for tensor, file := range index {
		if _, ok := w.tensors[tensor]; !ok {
			return formatErr(filepath.Join(dir, file), fmt.Sprintf("tensor %s is missing (%s puts it here)", excerpt.Name(tensor), IndexFile))
		}
	}
	w.Files = files
	return nil
}

func (w *Weights) mapOne(name, file string) (*stHeader, error) {
	f, err := regular.Open(name)
	if err != nil {
		return nil, fileErr(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open weights: %w", err)
	}
	data, release, err := mapFile(f, fi.Size())
	if err != nil {
		return nil, err
	}
	w.release = append(w.release, release)
	w.maps[file] = data
	return parseSafetensors(bytes.NewReader(data), int64(len(data)), name)
}

// checkArchitecture compares the tensors found with those the config's architecture has.
func (w *Weights) checkArchitecture(where string) error {
	want := map[string][]int{}
	for _, t := range w.Config.Tensors() {
		want[t.Name] = t.Shape
	}
	if w.Config.TieWordEmbeddings {
		if t, ok := w.tensors["lm_head.weight"]; ok && slices.Equal(t.Shape, want["model.embed_tokens.weight"]) {
			delete(w.tensors, "lm_head.weight") // a tied model's copy; the embedding is used
		}
	}
	for _, t := range w.Config.Tensors() {
		got, ok := w.tensors[t.Name]
		if !ok {
			return formatErr(filepath.Dir(where), fmt.Sprintf("tensor %s is missing (%s %s has it, shape %v)", excerpt.Name(t.Name), w.Config.ModelType, ConfigFile, t.Shape))
		}
		if !slices.Equal(got.Shape, t.Shape) {
			return formatErr(got.Source, fmt.Sprintf("tensor %s has shape %v, %s says %v", excerpt.Name(t.Name), got.Shape, ConfigFile, t.Shape))
		}
	}
	var extra []string
	for name := range w.tensors {
		if want[name] == nil {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		t := w.tensors[extra[0]]
		return formatErr(t.Source, fmt.Sprintf("tensor %s is not part of a %s model with this %s (%d unexpected tensors)", excerpt.Name(t.Name), w.Config.ModelType, ConfigFile, len(extra)))
	}
	return nil
}

// Names lists the tensors, sorted.
func (w *Weights) Names() []string {
	out := make([]string, 0, len(w.tensors))
	for n := range w.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Dtype is the stored dtype of a tensor (BF16, F16, F32), or "" if there is none of that name.
func (w *Weights) Dtype(name string) string { return w.tensors[name].Dtype }

// Shape is a tensor's shape, or nil if there is none of that name.
func (w *Weights) Shape(name string) []int { return slices.Clone(w.tensors[name].Shape) }

// Dtypes lists the distinct dtypes of the tensors, sorted.
func (w *Weights) Dtypes() []string {
	var out []string
	for _, t := range w.tensors {
		if !slices.Contains(out, t.Dtype) {
			out = append(out, t.Dtype)
		}
	}
	sort.Strings(out)
	return out
}

// Float32 converts a tensor into dst, whose length must be the tensor's element count.
func (w *Weights) Float32(name string, dst []float32) error {
	t, ok := w.tensors[name]
	if !ok {
		return fmt.Errorf("tensor %s: no such tensor in the model: %w", name, ErrFormat)
	}
	n := (t.End - t.Begin) / int64(dtypeSize[t.Dtype])
	if int64(len(dst)) != n {
		return fmt.Errorf("tensor %s: shape %v has %d values, the buffer %d", name, t.Shape, n, len(dst))
	}
	data := w.maps[filepath.Base(t.Source)]
	decode(t.Dtype, data[t.Begin:t.End], dst)
	return nil
}

// Load returns a tensor's values as a new float32 slice.
func (w *Weights) Load(name string) ([]float32, error) {
	t, ok := w.tensors[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s: no such tensor in the model: %w", name, ErrFormat)
	}
	dst := make([]float32, (t.End-t.Begin)/int64(dtypeSize[t.Dtype]))
	return dst, w.Float32(name, dst)
}

// Close releases the mapped files. The Weights must not be used after.
func (w *Weights) Close() error {
	var errs []error
	for _, r := range w.release {
		errs = append(errs, r())
	}
	w.release, w.maps = nil, nil
	return errors.Join(errs...)
}
