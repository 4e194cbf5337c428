package hf

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TokenizerFiles are the files WriteFolder copies from the tokenizer folder when present.
var TokenizerFiles = []string{
	"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
	"generation_config.json", "special_tokens_map.json", "added_tokens.json",
}

// WriteFolder writes a model folder transformers and vLLM load: config.json (cfg, with
// torch_dtype set to dtype), model.safetensors holding every tensor of cfg.Tensors() in dtype
// (BF16, F16 or F32; get returns each tensor's float32 values), and the TokenizerFiles found in
// tokenizerFrom ("" for none). It is written into a temporary folder beside dir and renamed into
// place, so dir appears complete or not at all, and holds no other *.safetensors (vLLM loads
// every one). dir must not exist yet, or be empty.
func WriteFolder(dir string, cfg Config, dtype string, get func(name string) []float32, tokenizerFrom string) error {
	dtype, err := ParseDtype(dtype)
	if err != nil {
		return err
	}
	return writeFolderAtomic(dir, func(tmp string) error { return fillFolder(tmp, cfg, dtype, get, tokenizerFrom) })
}

// writeFolderAtomic creates dir (absent or empty) filled by fill: fill writes into a temporary
// folder beside dir, which is then renamed into place, so dir appears complete or not at all.
func writeFolderAtomic(dir string, fill func(tmp string) error) error {
	if err := checkTarget(dir); err != nil {
		return err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("write model folder: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("write model folder: %w", err)
	}
	err = os.Chmod(tmp, 0o755) // MkdirTemp's 0700 would hide the model from other users
	if err == nil {
		err = fill(tmp)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	_ = os.Remove(dir) // an empty folder (checkTarget); rename cannot replace it
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("write model folder: %w", err)
	}
	return nil
}

// checkTarget refuses a dir that holds anything: replacing a model folder is the caller's
// decision, not a side effect.
func checkTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write model folder: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("write model folder %s: it exists and is not empty: choose a new folder or remove it", dir)
	}
	return nil
}

func fillFolder(tmp string, cfg Config, dtype string, get func(string) []float32, tokenizerFrom string) error {
	cfg.TorchDtype = torchDtypes[dtype]
	js, err := cfg.JSON()
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, ConfigFile), func(w io.Writer) error { _, err := w.Write(js); return err }); err != nil {
		return err
	}
	err = writeFileSync(filepath.Join(tmp, SingleFile), func(w io.Writer) error {
		return writeSafetensors(w, cfg.Tensors(), dtype, get)
	})
	if err != nil {
		return err
	}
	return copyTokenizer(tokenizerFrom, tmp)
}

// writeFileSync creates name, fills it with fill, and syncs it before the folder is renamed.
func writeFileSync(name string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write model folder: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(name), err)
	}
	return nil
}

// writeSafetensors writes specs in dtype: an 8-byte header length, a JSON header padded with
// spaces to a multiple of 8 (so the data is aligned), then each tensor's data in the order of
// specs, converted one tensor at a time.
func writeSafetensors(w io.Writer, specs []TensorSpec, dtype string, get func(string) []float32) error {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, s := range specs {
		n := s.Elements() * int64(dtypeSize[dtype])
		header[s.Name] = map[string]any{"dtype": dtype, "shape": s.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	if pad := (8 - len(hdr)%8) % 8; pad > 0 {
		hdr = append(hdr, strings.Repeat(" ", pad)...)
	}
	if err := binary.Write(w, binary.LittleEndian, uint64(len(hdr))); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	var buf []byte
	for _, s := range specs {
		vals := get(s.Name)
		if int64(len(vals)) != s.Elements() {
			return fmt.Errorf("tensor %s: got %d values for shape %v", s.Name, len(vals), s.Shape)
		}
		for len(vals) > 0 {
			n := min(len(vals), 1<<20) // converted in bounded chunks
			buf = encode(dtype, vals[:n], buf[:0])
			if _, err := w.Write(buf); err != nil {
				return err
			}
			vals = vals[n:]
		}
	}
	return nil
}

// copyTokenizer copies the TokenizerFiles present in from into to.
func copyTokenizer(from, to string) error {
	if from == "" {
		return nil
	}
	for _, name := range TokenizerFiles {
		src, err := os.Open(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
		err = writeFileSync(filepath.Join(to, name), func(w io.Writer) error { _, err := io.Copy(w, src); return err })
		src.Close()
		if err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
	}
	return nil
}
