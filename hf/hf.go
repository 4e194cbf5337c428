// Package hf reads and writes Hugging Face model folders: config.json (Qwen2/Qwen2.5, Qwen3 and
// Llama), safetensors weights (one model.safetensors or a sharded folder with
// model.safetensors.index.json; BF16, F16 and F32, computed in float32) and the tokenizer files
// beside them.
//
// Reading never trusts a file: every safetensors header is validated against the file's size
// (dtype, shape × element size = byte range, ranges in bounds, contiguous and non-overlapping)
// and against the tensors the config's architecture has, so a header that lies is a one-line
// error naming the tensor, and memory stays bounded by the file size. Weights are memory-mapped
// where the platform allows, so a 1 GB BF16 folder is not copied into memory; Float32 converts
// one tensor at a time into the caller's buffer.
//
// Writing (WriteFolder) produces a folder transformers and vLLM load: config.json, one
// model.safetensors in the chosen dtype, and the tokenizer files, written into a temporary
// folder and renamed into place.
//
// LoadLLM reads a folder into the CPU engine (model.LLM) and WriteLLM writes one back in the
// source dtype; ApplyAdapter merges a PEFT LoRA adapter into a loaded model.
package hf

import (
	"errors"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// ErrFormat is matched (errors.Is) by every error about a malformed or inconsistent file:
// a config.json, safetensors header or index that is not what the format or the architecture
// says. I/O failures do not match it.
var ErrFormat = errors.New("invalid model folder")

// ErrUnsupported is matched by errors about a well-formed setting drmas does not implement:
// an unknown model_type, a rope_scaling type, a dtype.
var ErrUnsupported = errors.New("unsupported")

// Error is a problem with one file of a folder, named by path.
type Error struct {
	File string // the file it is about
	Msg  string
	Err  error // ErrFormat, ErrUnsupported or an I/O error
}

// Error escapes control characters: the path and the names in Msg come from files.
func (e *Error) Error() string { return excerpt.Escape(e.File) + ": " + excerpt.Escape(e.Msg) }
func (e *Error) Unwrap() error { return e.Err }

func formatErr(file, msg string) error { return &Error{File: file, Msg: msg, Err: ErrFormat} }

func unsupported(file, msg string) error { return &Error{File: file, Msg: msg, Err: ErrUnsupported} }
