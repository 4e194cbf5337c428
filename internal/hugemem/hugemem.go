// Package hugemem allocates large, pointer-free buffers outside the Go heap, in anonymous
// mappings advised onto transparent huge pages (madvise MADV_HUGEPAGE), for the columnar stages
// whose working set is a few large columns reused from part to part.
//
// Why: the first touch of every 4 KiB page is a page fault, which on a virtual machine can cost
// a columnar stage as much system time as its computation takes user time (docs/design.md,
// "Design notes: where the code departs from DESIGN.md", has the figures), and the Go heap
// never asks for huge pages. An Arena
// maps its buffers 2 MiB-aligned and advises huge pages on them; where the kernel does not
// honour the advice (THP "never", another OS, the race detector) buffers behave like the Go
// heap's.
//
// Lifetime is explicit: memory from an Arena stays valid until Arena.Free, which unmaps it;
// a slice used after that faults. Arenas are for buffers owned by one component for the length
// of one job (a stage's per-part slots), not for values that escape it.
package hugemem

import (
	"slices"
	"unsafe"
)

// Plain is the element types an Arena may hold: types without pointers, so the garbage
// collector need not see them.
type Plain interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~int | ~uint |
		~float32 | ~float64 | ~bool
}

// MinBytes is the smallest buffer an Arena maps; smaller ones come from the Go heap (a
// mapping of its own would cost more than the faults it saves).
const MinBytes = 1 << 20

// hugePage is the size and alignment of a transparent huge page on amd64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// Arena hands out buffers from huge-page mappings and unmaps them all at Free. The zero value
// is ready to use; a nil *Arena allocates from the Go heap. An Arena must not be used by two
// goroutines at once.
type Arena struct {
	maps   [][]byte // whole mappings, for Free
	mapped int64
}

// Grow returns s with room for at least n more elements, like slices.Grow. When s must move,
// the new backing array comes from a (the Go heap when a is nil or the array is smaller than
// MinBytes), grows geometrically, and holds a copy of s; the old array stays valid until
// a.Free. Elements beyond len(s) have unspecified values.
func Grow[T Plain](a *Arena, s []T, n int) []T {
	if n < 0 {
		panic("hugemem: negative Grow")
	}
	if n <= cap(s)-len(s) {
		return s
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	want := max(len(s)+n, cap(s)+cap(s)/4)
	if a == nil || want*size < MinBytes {
		return slices.Grow(s, n)
	}
	b := a.alloc(want * size)
	t := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)
	return t[:copy(t, s)]
}

// Mapped is the number of bytes the Arena holds mapped (0 after Free).
func (a *Arena) Mapped() int64 {
	if a == nil {
		return 0
	}
	return a.mapped
}

// Free unmaps every buffer the Arena handed out; it is then empty and reusable. Slices from it
// must not be used after Free.
func (a *Arena) Free() {
	if a == nil {
		return
	}
	for _, m := range a.maps {
		unmap(m)
	}
	a.maps, a.mapped = nil, 0
}

// alloc returns at least size bytes: a 2 MiB-aligned, huge-page-advised part of a new mapping
// where the platform allows, else a Go heap slice.
func (a *Arena) alloc(size int) []byte {
	size = (size + hugePage - 1) &^ (hugePage - 1)
	whole, b := mapHuge(size)
	if whole == nil {
		return make([]byte, size)
	}
	a.maps = append(a.maps, whole)
	a.mapped += int64(len(whole))
	return b
}
