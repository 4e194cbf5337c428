package ir

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Ptr is a device address: a CUdeviceptr on a GPU, an encoded buffer id and byte offset in the
// interpreter.
type Ptr uint64

// Add returns p advanced by words 4-byte words.
func (p Ptr) Add(words int) Ptr { return p + Ptr(4*words) }

// Arg is one kernel argument.
type Arg struct {
	Kind ParamKind
	P    Ptr
	I    int32
	F    float32
}

// ArgP is a pointer argument.
func ArgP(p Ptr) Arg { return Arg{Kind: PPtr, P: p} }

// ArgI is an int32 argument.
func ArgI(v int) Arg { return Arg{Kind: PS32, I: int32(v)} }

// ArgF is a float32 argument.
func ArgF(v float32) Arg { return Arg{Kind: PF32, F: v} }

// CheckArgs reports whether args match k's parameters.
func CheckArgs(k *Kernel, args []Arg) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("kernel %s: %d arguments for %d parameters", k.Name, len(args), len(k.Params))
	}
	for i, a := range args {
		if a.Kind != k.Params[i].Kind {
			return fmt.Errorf("kernel %s: argument %d (%s) has the wrong kind", k.Name, i, k.Params[i].Name)
		}
	}
	return nil
}

// Interp runs kernels on the CPU. It implements the same device operations as the CUDA
// binding (Alloc, Write, Read, Zero, Launch), so code written against them can be tested
// without a GPU. Not safe for concurrent use.
type Interp struct {
	kernels map[string]*Kernel
	bufs    map[uint64][]uint32
	next    uint64
	// launch state
	writes map[Ptr]gwrite // global word -> its writer during a launch
	reads  map[Ptr]gread  // global word -> who read it during a launch
}

const ptrShift = 40

// NewInterp returns an interpreter that can launch ks by name.
func NewInterp(ks []*Kernel) *Interp {
	m := map[string]*Kernel{}
	for _, k := range ks {
		m[k.Name] = k
	}
	return &Interp{kernels: m, bufs: map[uint64][]uint32{}, next: 1}
}

// Poison fills every buffer Alloc returns: a quiet NaN with a recognisable payload. Device
// memory from cuMemAlloc is undefined, not zero, so a kernel or engine that reads a word it
// never wrote (or zeroed) must get garbage here too, and fail its tests.
const Poison uint32 = 0x7fc0bad0

// Alloc returns a buffer of words 4-byte words, each set to Poison.
func (in *Interp) Alloc(words int) (Ptr, error) {
	if words < 0 || words >= 1<<(ptrShift-2) {
		return 0, fmt.Errorf("interp: alloc %d words", words)
	}
	id := in.next
	in.next++
	b := make([]uint32, words)
	for i := range b {
		b[i] = Poison
	}
	in.bufs[id] = b
	return Ptr(id << ptrShift), nil
}

// Live is the number of buffers allocated and not yet freed (leak checks in tests).
func (in *Interp) Live() int { return len(in.bufs) }

// Free releases a buffer.
func (in *Interp) Free(p Ptr) error {
	id := uint64(p) >> ptrShift
	if _, ok := in.bufs[id]; !ok || uint64(p)&(1<<ptrShift-1) != 0 {
		return fmt.Errorf("interp: free of %#x: not an allocation", uint64(p))
	}
	delete(in.bufs, id)
	return nil
}

func (in *Interp) span(p Ptr, words int) ([]uint32, error) {
	id, off := uint64(p)>>ptrShift, uint64(p)&(1<<ptrShift-1)
	b, ok := in.bufs[id]
	if !ok || off%4 != 0 || off/4+uint64(words) > uint64(len(b)) {
		return nil, fmt.Errorf("interp: access of %d words at %#x out of bounds", words, uint64(p))
	}
	return b[off/4 : off/4+uint64(words)], nil
}

// WriteF32 copies src to the device at dst.
func (in *Interp) WriteF32(dst Ptr, src []float32) error {
	s, err := in.span(dst, len(src))
	if err != nil {
		return err
	}
	for i, v := range src {
		s[i] = math.Float32bits(v)
	}
	return nil
}

// WriteI32 copies src to the device at dst.
func (in *Interp) WriteI32(dst Ptr, src []int32) error {
	s, err := in.span(dst, len(src))
	if err != nil {
		return err
	}
	for i, v := range src {
		s[i] = uint32(v)
	}
	return nil
}

// ReadF32 copies len(dst) words from the device at src.
func (in *Interp) ReadF32(dst []float32, src Ptr) error {
	s, err := in.span(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s)))
	return nil
}

// Zero clears words words at p.
func (in *Interp) Zero(p Ptr, words int) error {
	s, err := in.span(p, words)
	if err != nil {
		return err
	}
	clear(s)
	return nil
}

// Sync does nothing: launches run synchronously.
func (in *Interp) Sync() error { return nil }

// Launch runs kernel name over grid×block threads.
func (in *Interp) Launch(name string, grid, block [3]int, args ...Arg) error {
	k, ok := in.kernels[name]
	if !ok {
		return fmt.Errorf("interp: no kernel %s", name)
	}
	if err := CheckArgs(k, args); err != nil {
		return fmt.Errorf("interp: %w", err)
	}
	if block[2] != 1 || block[0] < 1 || block[1] < 1 || block[0]*block[1] > 1024 {
		return fmt.Errorf("interp: kernel %s: bad block %v", name, block)
	}
	for _, g := range grid {
		if g < 0 {
			return fmt.Errorf("interp: kernel %s: bad grid %v", name, grid)
		}
	}
	if grid[0] > math.MaxInt32 || grid[1] > 65535 || grid[2] > 65535 {
		return fmt.Errorf("interp: kernel %s: grid %v above a GPU's limits (2^31-1, 65535, 65535)", name, grid)
	}
	in.writes, in.reads = map[Ptr]gwrite{}, map[Ptr]gread{}
	defer func() { in.writes, in.reads = nil, nil }()
	nt := block[0] * block[1]
	r := &run{in: in, k: k, grid: grid, block: block, nt: nt, regs: make([][]uint64, k.nregs)}
	for i := range r.regs {
		r.regs[i] = make([]uint64, nt)
	}
	r.shared = make([][]uint32, len(k.shared))
	r.sw = make([][]int32, len(k.shared))
	r.swEpoch = make([][]int32, len(k.shared))
	r.sr = make([][]int32, len(k.shared))
	r.srEpoch = make([][]int32, len(k.shared))
	for i, s := range k.shared {
		r.shared[i] = make([]uint32, s.words)
		r.sw[i] = make([]int32, s.words)
		r.swEpoch[i] = make([]int32, s.words)
		r.sr[i] = make([]int32, s.words)
		r.srEpoch[i] = make([]int32, s.words)
	}
	full := make([]bool, nt)
	for i := range full {
		full[i] = true
	}
	for z := 0; z < grid[2]; z++ {
		for y := 0; y < grid[1]; y++ {
			for x := 0; x < grid[0]; x++ {
				r.cta = [3]int{x, y, z}
				r.blockID = int64((z*grid[1]+y)*grid[0] + x)
				r.epoch = 1
				for i := range r.shared {
					clear(r.shared[i])
					clear(r.swEpoch[i])
					clear(r.srEpoch[i])
				}
				for i, p := range k.Params {
					v := uint64(0)
					switch p.Kind {
					case PPtr:
						v = uint64(args[i].P)
					case PS32:
						v = uint64(uint32(args[i].I))
					case PF32:
						v = uint64(math.Float32bits(args[i].F))
					}
					for t := range r.regs[p.reg.id] {
						r.regs[p.reg.id][t] = v
					}
				}
				r.exec(k.body, full)
				if r.err != nil {
					return fmt.Errorf("interp: kernel %s block %v: %w", name, r.cta, r.err)
				}
			}
		}
	}
	return nil
}

// gwrite is the writer of a global word: block·nthreads + thread, and the barrier epoch of
// its block at the store.
type gwrite struct {
	gid   int64
	epoch int32
}

// gread is who read a global word during a launch: the last block that read it (multiBlock:
// another block read it before), and in that block the barrier epoch of the last read and its
// thread (several: more than one thread read it in that epoch).
type gread struct {
	block      int64
	multiBlock bool
	gid        int64
	epoch      int32
	several    bool
}

type run struct {
	in      *Interp
	k       *Kernel
	grid    [3]int
	block   [3]int
	cta     [3]int
	nt      int
	blockID int64
	regs    [][]uint64
	shared  [][]uint32
	// shared race tracking per word: last writer and its epoch, last reader (-2: several)
	// and its epoch.
	sw, swEpoch, sr, srEpoch [][]int32
	epoch                    int32
	err                      error
}

func any_(m []bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

func (r *run) exec(ss []Stmt, mask []bool) {
	for i := range ss {
		if r.err != nil {
			return
		}
		s := &ss[i]
		switch s.kind {
		case sBarrier:
			for _, v := range mask {
				if !v {
					r.err = errors.New("bar.sync reached by part of the block")
					return
				}
			}
			r.epoch++
		case sIf:
			c := r.regs[s.cond.id]
			m1, m2 := make([]bool, len(mask)), make([]bool, len(mask))
			for t, v := range mask {
				if v {
					m1[t] = c[t] != 0
					m2[t] = c[t] == 0
				}
			}
			if any_(m1) {
				r.exec(s.then, m1)
			}
			if s.els != nil && any_(m2) {
				r.exec(s.els, m2)
			}
		case sLoop:
			cur := append([]bool(nil), mask...)
			for iter := 0; ; iter++ {
				if iter > 1<<26 {
					r.err = errors.New("loop ran more than 2^26 iterations")
					return
				}
				r.exec(s.pre, cur)
				c := r.regs[s.cond.id]
				next := make([]bool, len(cur))
				for t, v := range cur {
					next[t] = v && c[t] != 0
				}
				if !any_(next) || r.err != nil {
					break
				}
				r.exec(s.body, next)
				cur = next
			}
		case sInstr:
			for t, v := range mask {
				if v {
					r.instr(s, t)
					if r.err != nil {
						return
					}
				}
			}
		}
	}
}

func f32(u uint64) float32 { return math.Float32frombits(uint32(u)) }
func fu(f float32) uint64  { return uint64(math.Float32bits(f)) }
func i32(u uint64) int32   { return int32(uint32(u)) }
func iu(i int32) uint64    { return uint64(uint32(i)) }
func bu(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func ftz(f float32) float32 {
	if f != 0 && math.Abs(float64(f)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(f)))
	}
	return f
}

// fmaF32 is fma.rn.f32: a·b + c rounded once to float32. The product of two float32 values
// is exact in float64; the sum is rounded to float64 by round-to-odd (round to nearest, then,
// when inexact and the last bit is even, step towards the exact value), which makes the final
// rounding to float32 the correct one (53 ≥ 24+2 bits). float32(math.FMA(...)) rounds twice
// and is one unit in the last place off when the float64 sum lands on a float32 tie.
func fmaF32(a, b, c float32) float32 {
	p, z := float64(a)*float64(b), float64(c)
	s := p + z
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bv := s - p
	e := (p - (s - bv)) + (z - bv) // the rounding error of s (TwoSum), exact
	if e != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

func fmin(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case a < b:
		return a
	}
	return b
}

func fmax(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case a > b:
		return a
	}
	return b
}

func (r *run) instr(s *Stmt, t int) {
	arg := func(i int) uint64 { return r.regs[s.args[i].id][t] }
	var out uint64
	isF := len(s.args) > 0 && s.args[0].t == F32
	switch s.op {
	case OpMov:
		out = arg(0)
	case OpConstI:
		out = iu(s.imm)
	case OpConstF:
		out = fu(s.fimm)
	case OpSpecial:
		tx, ty := t%r.block[0], t/r.block[0]
		out = iu(int32([...]int{tx, ty, r.block[0], r.block[1], r.cta[0], r.cta[1], r.cta[2], r.grid[0], r.grid[1], r.grid[2]}[s.sp]))
	case OpAdd, OpSub, OpMul, OpDiv, OpRem, OpMin, OpMax:
		if isF {
			a, b := f32(arg(0)), f32(arg(1))
			var v float32
			switch s.op {
			case OpAdd:
				v = a + b
			case OpSub:
				v = a - b
			case OpMul:
				v = a * b
			case OpDiv:
				v = a / b
			case OpMin:
				v = fmin(a, b)
			case OpMax:
				v = fmax(a, b)
			}
			out = fu(v)
		} else {
			a, b := i32(arg(0)), i32(arg(1))
			var v int32
			switch s.op {
			case OpAdd:
				v = a + b
			case OpSub:
				v = a - b
			case OpMul:
				v = a * b
			case OpDiv, OpRem:
				if b == 0 {
					r.err = errors.New("integer division by zero")
					return
				}
				if s.op == OpDiv {
					v = a / b
				} else {
					v = a % b
				}
			case OpMin:
				v = min(a, b)
			case OpMax:
				v = max(a, b)
			}
			out = iu(v)
		}
	case OpFma:
		out = fu(fmaF32(f32(arg(0)), f32(arg(1)), f32(arg(2))))
	case OpNeg:
		out = fu(-f32(arg(0)))
	case OpAbs:
		out = fu(float32(math.Abs(float64(f32(arg(0))))))
	case OpSqrt:
		out = fu(float32(math.Sqrt(float64(f32(arg(0))))))
	case OpEx2:
		out = fu(ftz(float32(math.Exp2(float64(ftz(f32(arg(0))))))))
	case OpLg2:
		out = fu(ftz(float32(math.Log2(float64(ftz(f32(arg(0))))))))
	case OpShl: // PTX: the amount is unsigned and clamps at 32, as Go's shifts do (no mask)
		out = iu(i32(arg(0)) << uint32(arg(1)))
	case OpShr:
		out = iu(i32(arg(0)) >> uint32(arg(1)))
	case OpAnd:
		out = arg(0) & arg(1)
	case OpOr:
		out = arg(0) | arg(1)
	case OpNot:
		out = bu(arg(0) == 0)
	case OpSetp:
		var lt, eq, gt bool
		if isF {
			a, b := f32(arg(0)), f32(arg(1))
			lt, eq, gt = a < b, a == b, a > b
			if s.cmp == NE && (a != a || b != b) {
				out = 1
				break
			}
		} else {
			a, b := i32(arg(0)), i32(arg(1))
			lt, eq, gt = a < b, a == b, a > b
		}
		out = bu([...]bool{lt, lt || eq, gt, gt || eq, eq, lt || gt}[s.cmp])
	case OpSelp:
		if arg(0) != 0 {
			out = arg(1)
		} else {
			out = arg(2)
		}
	case OpCvtF:
		out = fu(float32(i32(arg(0))))
	case OpCvtI:
		f := f32(arg(0))
		switch {
		case f != f:
			out = 0
		case f >= math.MaxInt32:
			out = iu(math.MaxInt32)
		case f <= math.MinInt32:
			out = iu(math.MinInt32)
		default:
			out = iu(int32(f))
		}
	case OpLdG, OpStG:
		p := Ptr(arg(0)) + Ptr(int64(i32(arg(1)))*4)
		w, err := r.in.span(p, 1)
		if err != nil || int64(i32(arg(1))) < 0 {
			r.err = fmt.Errorf("thread %d: global %s at index %d: out of bounds", t, map[Op]string{OpLdG: "load", OpStG: "store"}[s.op], i32(arg(1)))
			return
		}
		gid := r.blockID*int64(r.nt) + int64(t)
		if s.op == OpLdG {
			if wr, ok := r.in.writes[p]; ok && wr.gid/int64(r.nt) != r.blockID {
				r.err = fmt.Errorf("thread %d: global load at index %d of a word block %d wrote in the same launch", t, i32(arg(1)), wr.gid/int64(r.nt))
				return
			} else if ok && wr.gid != gid && wr.epoch == r.epoch {
				r.err = fmt.Errorf("thread %d: global load at index %d of a word thread %d wrote since the last barrier", t, i32(arg(1)), wr.gid%int64(r.nt))
				return
			}
			out = uint64(w[0])
			rd, seen := r.in.reads[p]
			switch {
			case !seen || rd.block != r.blockID:
				rd = gread{block: r.blockID, multiBlock: seen, gid: gid, epoch: r.epoch}
			case rd.epoch != r.epoch:
				rd.gid, rd.epoch, rd.several = gid, r.epoch, false
			case rd.gid != gid:
				rd.several = true
			}
			r.in.reads[p] = rd
		} else {
			if wr, ok := r.in.writes[p]; ok && wr.gid != gid {
				r.err = fmt.Errorf("thread %d: global store at index %d races with thread %d of block %d", t, i32(arg(1)), wr.gid%int64(r.nt), wr.gid/int64(r.nt))
				return
			}
			// A store to a word another thread read: blocks run in any order on a GPU, and the
			// threads of a block between two barriers too, so the read may see either value.
			if rd, ok := r.in.reads[p]; ok {
				switch {
				case rd.multiBlock || rd.block != r.blockID:
					r.err = fmt.Errorf("thread %d: global store at index %d overwrites a word another block read in the same launch", t, i32(arg(1)))
					return
				case rd.epoch == r.epoch && (rd.several || rd.gid != gid):
					r.err = fmt.Errorf("thread %d: global store at index %d overwrites a word another thread read since the last barrier", t, i32(arg(1)))
					return
				}
			}
			r.in.writes[p] = gwrite{gid, r.epoch}
			w[0] = uint32(arg(2))
			return
		}
	case OpLdS, OpStS:
		idx := int(i32(arg(0)))
		a := s.arr
		if idx < 0 || idx >= len(r.shared[a]) {
			r.err = fmt.Errorf("thread %d: shared %s[%d] out of bounds", t, r.k.shared[a].name, idx)
			return
		}
		tt := int32(t)
		if r.swEpoch[a][idx] == r.epoch && r.sw[a][idx] != tt {
			r.err = fmt.Errorf("thread %d: shared %s[%d] was written by thread %d since the last barrier", t, r.k.shared[a].name, idx, r.sw[a][idx])
			return
		}
		if s.op == OpLdS {
			if r.swEpoch[a][idx] == 0 { // epochs start at 1: no thread of the block wrote it
				r.err = fmt.Errorf("thread %d: shared %s[%d] read before any thread of the block wrote it (shared memory starts undefined on a GPU)", t, r.k.shared[a].name, idx)
				return
			}
			if r.srEpoch[a][idx] != r.epoch {
				r.srEpoch[a][idx], r.sr[a][idx] = r.epoch, tt
			} else if r.sr[a][idx] != tt {
				r.sr[a][idx] = -2
			}
			out = uint64(r.shared[a][idx])
		} else {
			if r.srEpoch[a][idx] == r.epoch && r.sr[a][idx] != tt {
				r.err = fmt.Errorf("thread %d: shared %s[%d] overwritten after another thread read it since the last barrier", t, r.k.shared[a].name, idx)
				return
			}
			r.swEpoch[a][idx], r.sw[a][idx] = r.epoch, tt
			r.shared[a][idx] = uint32(arg(1))
			return
		}
	}
	r.regs[s.dst.id][t] = out
}
