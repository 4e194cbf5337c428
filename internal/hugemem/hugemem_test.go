package hugemem

import (
	"testing"
	"unsafe"
)

func TestGrowKeepsContentsAndAlignment(t *testing.T) {
	var a Arena
	defer a.Free()
	s := Grow[int64](&a, nil, 10) // small: Go heap
	if a.Mapped() != 0 {
		t.Fatalf("a %d-byte buffer was mapped (%d bytes), want the Go heap", 10*8, a.Mapped())
	}
	for i := range 10 {
		s = append(s, int64(i))
	}
	n := 3 << 20 / 8 // 3 MiB of int64: mapped where the platform maps
	s = Grow(&a, s, n)
	if cap(s)-len(s) < n || len(s) != 10 {
		t.Fatalf("Grow(%d): len %d cap %d", n, len(s), cap(s))
	}
	for i := range 10 {
		if s[i] != int64(i) {
			t.Fatalf("s[%d] = %d after Grow, want %d", i, s[i], i)
		}
	}
	s = s[:cap(s)]
	for i := range s {
		s[i] = int64(i) * 3
	}
	if mapsHere() {
		if a.Mapped() < int64(n*8) {
			t.Fatalf("mapped %d bytes, want ≥ %d", a.Mapped(), n*8)
		}
		if addr := uintptr(unsafe.Pointer(unsafe.SliceData(s))); addr%hugePage != 0 {
			t.Fatalf("buffer at %#x is not 2 MiB-aligned", addr)
		}
	}
	// Room already there: the same array.
	if g := Grow(&a, s[:5], 5); unsafe.SliceData(g) != unsafe.SliceData(s) {
		t.Fatal("Grow moved a slice that had room")
	}
	// Geometric growth: growing by one element moves to a quarter more capacity at least.
	c := cap(s)
	g := Grow(&a, s, 1)
	if cap(g) < c+c/4 {
		t.Fatalf("Grow by 1 from cap %d gave cap %d, want ≥ %d", c, cap(g), c+c/4)
	}
	for i := range s {
		if g[i] != int64(i)*3 {
			t.Fatalf("g[%d] = %d, want %d", i, g[i], int64(i)*3)
		}
	}
	a.Free()
	if a.Mapped() != 0 {
		t.Fatalf("Mapped after Free = %d", a.Mapped())
	}
	// Reusable after Free.
	f := Grow[float32](&a, nil, 1<<20)[:1<<20]
	f[len(f)-1] = 1
	if mapsHere() && a.Mapped() < 4<<20 {
		t.Fatalf("arena reused after Free mapped %d bytes for 4 MiB", a.Mapped())
	}
}

func TestNilArenaUsesHeap(t *testing.T) {
	var a *Arena
	s := Grow[int32](a, []int32{7}, 1<<20)
	if len(s) != 1 || s[0] != 7 || cap(s) < 1+1<<20 {
		t.Fatalf("Grow on a nil arena: len %d cap %d", len(s), cap(s))
	}
	s = s[:cap(s)]
	s[len(s)-1] = 2 // writable to the end
	a.Free()        // a no-op, not a crash
}

// mapsHere reports whether this build maps buffers (Linux without the race detector).
func mapsHere() bool {
	w, _ := mapHuge(hugePage)
	if w == nil {
		return false
	}
	unmap(w)
	return true
}

// BenchmarkFirstTouch touches 64 MiB a page at a time: freshly mapped by an Arena (huge pages
// where the kernel allows) and from the Go heap (4 KiB pages; the heap may reuse pages it
// faulted in before, so this side is a lower bound on the 4 KiB cost).
func BenchmarkFirstTouch(b *testing.B) {
	const size = 64 << 20
	touch := func(p []byte) {
		for i := 0; i < len(p); i += 4096 {
			p[i] = 1
		}
	}
	b.Run("huge", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			var a Arena
			touch(Grow[byte](&a, nil, size)[:size])
			a.Free()
		}
	})
	b.Run("4KiB", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			m := make([]byte, size) // a fresh span each time: the last one is garbage
			touch(m)
		}
	})
}
