// Package seeds derives the deterministic seeds and ids of a run: every random choice in drmas
// is seeded from (run seed, iteration, task, sample, …) through Derive, never from time or
// global state.
package seeds

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Derive hashes a root seed and a path of parts (ints, strings) into a 64-bit seed.
func Derive(root uint64, parts ...any) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], root)
	h.Write(b[:])
	for _, p := range parts {
		fmt.Fprintf(h, "|%T:%v", p, p)
	}
	sum := h.Sum(nil)
	return binary.LittleEndian.Uint64(sum[:8])
}

// ID hashes parts into a 16-hex-digit id (used for prompt-group uids).
func ID(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "|%T:%v", p, p)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
