// Package model is drmas's built-in policy: a small decoder-only transformer
// in pure Go (float32, no cgo) with hand-written forward and backward passes,
// batched KV-cache sampling, an AdamW optimizer and safetensors checkpoints.
//
// What the package promises:
//
//   - Tokenizer: byte-level ids 0..255 plus the special tokens PAD, BOS, EOS,
//     SEP and four role markers; VocabSize is the total.
//   - Determinism: New with the same Config and seed yields bit-identical
//     weights (and therefore identical checkpoint bytes); the same inputs give
//     bit-identical outputs run to run. Work is split across goroutines only
//     in ways whose floating-point reduction order does not depend on
//     scheduling, nor on the number of cores (column sums over fixed chunks
//     of rows, GEMM tiles each accumulated in one fixed order).
//   - Element-wise math: GELU, the softmax exponentials and LayerNorm run as
//     AVX2/FMA kernels (float32 Cephes-polynomial exp, float32 row
//     statistics) where the CPU has them, each with a plain Go reference it is
//     tested against (elem.go); every element goes through the same
//     instructions whatever its position, so batch composition cannot change
//     a result.
//   - Scoring: Forward / Score return, for every response token, the log-prob
//     log softmax(logits/temperature)[token] and the entropy of the same
//     distribution, given the prompt and the previous response tokens.
//     Pass.Backward accumulates the gradient of
//     Σ dLogProb·logprob + Σ dEntropy·entropy into a Grads; calling it on
//     several passes accumulates. The gradients are checked against central
//     finite differences in the tests.
//   - Sampling: Sample advances every active request one token per step
//     through one batched forward over a KV cache. Each request has its own
//     RNG seeded only from SampleRequest.Seed, so a request yields the same
//     tokens alone or inside any batch. The log-prob reported for a sampled
//     token is log softmax(logits/temperature) before top-p truncation (at
//     temperature 1 when greedy), i.e. what Forward returns for that token.
//   - Checkpoints: WriteSafetensors (package safetensors) writes the format
//     deterministically (tensors sorted by name, contiguous offsets, header
//     space-padded to 8 bytes); ReadSafetensors validates everything and
//     returns errors, never panics, on malformed input.
//
// Sequences inside a batch are packed (concatenated without padding)
// internally; attention never crosses sequence boundaries, so results do not
// depend on what else is in the batch.
package model

//go:generate go run ./internal/asmgen/gen -dir .
