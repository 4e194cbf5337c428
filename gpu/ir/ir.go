// Package ir is a tiny kernel language for the GPU learner: a kernel is written once in Go
// with a Builder and can then be emitted as PTX text (EmitPTX, for the NVIDIA driver to
// JIT-compile) or run on the CPU by an interpreter (Interp) that executes each thread block in
// lockstep.
//
// What the package promises:
//
//   - The emitted PTX and the interpreter implement the same semantics for every instruction
//     of the language (32-bit integer and float arithmetic, comparisons and selects,
//     structured if/loop, global and shared float32/int32 memory, bar.sync), so a kernel's
//     math can be checked against the CPU engine on a machine without a GPU. The
//     approximations the PTX uses (ex2.approx, lg2.approx) are modelled by float32 rounding of
//     the exact function, which is within their documented error.
//   - The interpreter refuses launches a GPU refuses (a block of more than 1024 threads, a
//     grid above 2^31-1 × 65535 × 65535 blocks).
//   - The interpreter checks what a GPU would not: out-of-bounds global and shared accesses,
//     shared-memory reads of a word no thread of the block wrote (a GPU's shared memory starts
//     undefined; the interpreter's starts at 0 and must not be relied on),
//     bar.sync reached by part of a block, shared-memory races between barriers (a thread
//     reading or overwriting a word another thread wrote since the last barrier), global
//     write/write races between threads of one launch, global loads of a word another
//     block wrote in the launch or another thread of the block wrote since the last barrier,
//     and global stores to a word another block read in the launch or another thread of the
//     block read since the last barrier.
//     Each is an error, never a panic. (Threads run in lockstep, statement by statement, so
//     without these checks a race would read the value a GPU might not.)
//   - EmitPTX output is deterministic (same kernels, same text).
//
// Registers are typed variables (S32, F32, Pred; U64 only for pointer parameters) and may be
// reassigned, so loops carry state in ordinary registers.
package ir

import (
	"fmt"
	"math"
)

// Type is a register's type.
type Type int

// Register types.
const (
	S32 Type = iota
	F32
	Pred
	U64 // pointer parameters only
)

func (t Type) String() string {
	return [...]string{"s32", "f32", "pred", "u64"}[t]
}

// Reg is a virtual register of a kernel.
type Reg struct {
	id int
	t  Type
}

// Type returns the register's type.
func (r Reg) Type() Type { return r.t }

// Op is an instruction kind.
type Op int

// Instructions. Operand types are checked when the kernel is built.
const (
	OpMov     Op = iota // dst = a (same type)
	OpConstI            // dst(s32) = imm
	OpConstF            // dst(f32) = fimm
	OpSpecial           // dst(s32) = special register sp
	OpAdd
	OpSub
	OpMul // s32: low 32 bits
	OpDiv // s32: truncating; f32: IEEE round-to-nearest
	OpRem
	OpMin
	OpMax
	OpFma // f32 only: dst = a*b + c, single rounding
	OpNeg
	OpAbs
	OpSqrt // f32, round-to-nearest
	OpEx2  // f32, 2^a (ex2.approx.ftz)
	OpLg2  // f32, log2 a (lg2.approx.ftz)
	OpShl  // s32; the amount is unsigned and clamps at 32 (shl.b32): 32 or more gives 0
	OpShr  // s32 arithmetic; the amount clamps at 32 (shr.s32): 32 or more gives 0 or -1
	OpAnd  // s32 or pred
	OpOr   // s32 or pred
	OpNot  // pred
	OpSetp // dst(pred) = a cmp b
	OpSelp // dst = p ? a : b
	OpCvtF // dst(f32) = float(a s32), round to nearest
	OpCvtI // dst(s32) = int(a f32), truncate toward zero
	OpLdG  // dst = global[ptr a + 4·idx b]
	OpStG  // global[ptr a + 4·idx b] = c
	OpLdS  // dst = shared arr[idx a]
	OpStS  // shared arr[idx a] = b
)

// Cmp is a comparison of OpSetp.
type Cmp int

// Comparisons.
const (
	LT Cmp = iota
	LE
	GT
	GE
	EQ
	NE
)

// Special registers.
const (
	TidX = iota
	TidY
	NtidX
	NtidY
	CtaidX
	CtaidY
	CtaidZ
	NctaidX
	NctaidY
	NctaidZ
)

var specialNames = [...]string{"%tid.x", "%tid.y", "%ntid.x", "%ntid.y", "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z"}

// Stmt is one statement of a kernel body: an instruction, an if, a loop or a barrier.
type Stmt struct {
	kind stmtKind
	// instruction
	op   Op
	dst  Reg
	args []Reg
	imm  int32
	fimm float32
	cmp  Cmp
	sp   int
	arr  int // shared array index
	// if: cond, then, els; loop: pre computes cond, body runs while cond
	cond Reg
	then []Stmt
	els  []Stmt
	pre  []Stmt
	body []Stmt
}

type stmtKind int

const (
	sInstr stmtKind = iota
	sIf
	sLoop
	sBarrier
)

// ParamKind is the type of a kernel parameter.
type ParamKind int

// Parameter kinds.
const (
	PPtr ParamKind = iota // .u64 device pointer to float32 or int32 words
	PS32
	PF32
)

// Param is one kernel parameter.
type Param struct {
	Name string
	Kind ParamKind
	reg  Reg
}

type sharedArr struct {
	name  string
	words int
}

// Kernel is a built kernel.
type Kernel struct {
	Name   string
	Params []Param
	shared []sharedArr
	body   []Stmt
	nregs  int
	types  []Type
}

// Builder builds one kernel. Methods append statements to the current block.
type Builder struct {
	k     *Kernel
	stack []*[]Stmt
	err   error
}

// NewKernel starts a kernel.
func NewKernel(name string) *Builder {
	b := &Builder{k: &Kernel{Name: name}}
	b.stack = []*[]Stmt{&b.k.body}
	return b
}

// Build returns the kernel, or the first construction error.
func (b *Builder) Build() (*Kernel, error) {
	if b.err != nil {
		return nil, fmt.Errorf("kernel %s: %w", b.k.Name, b.err)
	}
	if len(b.stack) != 1 {
		return nil, fmt.Errorf("kernel %s: unclosed block", b.k.Name)
	}
	return b.k, nil
}

func (b *Builder) fail(format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, a...)
	}
}

func (b *Builder) newReg(t Type) Reg {
	r := Reg{id: b.k.nregs, t: t}
	b.k.nregs++
	b.k.types = append(b.k.types, t)
	return r
}

func (b *Builder) emit(s Stmt) {
	cur := b.stack[len(b.stack)-1]
	*cur = append(*cur, s)
}

// Param declares a parameter; pointer parameters give a U64 register.
func (b *Builder) Param(name string, kind ParamKind) Reg {
	t := map[ParamKind]Type{PPtr: U64, PS32: S32, PF32: F32}[kind]
	r := b.newReg(t)
	b.k.Params = append(b.k.Params, Param{Name: name, Kind: kind, reg: r})
	return r
}

// Ptr, I and F declare parameters of each kind.
func (b *Builder) Ptr(name string) Reg { return b.Param(name, PPtr) }

// IParam declares an int32 parameter.
func (b *Builder) IParam(name string) Reg { return b.Param(name, PS32) }

// FParam declares a float32 parameter.
func (b *Builder) FParam(name string) Reg { return b.Param(name, PF32) }

// Shared declares a shared float32 array of words elements and returns its handle.
func (b *Builder) Shared(name string, words int) int {
	b.k.shared = append(b.k.shared, sharedArr{name, words})
	return len(b.k.shared) - 1
}

func (b *Builder) instr(op Op, t Type, args ...Reg) Reg {
	d := b.newReg(t)
	b.emit(Stmt{kind: sInstr, op: op, dst: d, args: args})
	return d
}

func (b *Builder) same(op string, a, c Reg) {
	if a.t != c.t {
		b.fail("%s: operand types %v and %v differ", op, a.t, c.t)
	}
}

// I returns a new s32 register holding v.
func (b *Builder) I(v int) Reg {
	d := b.newReg(S32)
	b.emit(Stmt{kind: sInstr, op: OpConstI, dst: d, imm: int32(v)})
	return d
}

// F returns a new f32 register holding v.
func (b *Builder) F(v float32) Reg {
	d := b.newReg(F32)
	b.emit(Stmt{kind: sInstr, op: OpConstF, dst: d, fimm: v})
	return d
}

// Special reads a special register (TidX, CtaidY, ...).
func (b *Builder) Special(sp int) Reg {
	d := b.newReg(S32)
	b.emit(Stmt{kind: sInstr, op: OpSpecial, dst: d, sp: sp})
	return d
}

// Var returns a new mutable register initialised from a.
func (b *Builder) Var(a Reg) Reg { return b.instr(OpMov, a.t, a) }

// Set assigns a to the existing register dst.
func (b *Builder) Set(dst, a Reg) {
	b.same("set", dst, a)
	b.emit(Stmt{kind: sInstr, op: OpMov, dst: dst, args: []Reg{a}})
}

func (b *Builder) bin(op Op, name string, a, c Reg) Reg {
	b.same(name, a, c)
	if a.t != S32 && a.t != F32 {
		b.fail("%s: type %v", name, a.t)
	}
	return b.instr(op, a.t, a, c)
}

// Add etc. are the arithmetic instructions on two registers of the same type.
func (b *Builder) Add(a, c Reg) Reg { return b.bin(OpAdd, "add", a, c) }

// Sub is a - c.
func (b *Builder) Sub(a, c Reg) Reg { return b.bin(OpSub, "sub", a, c) }

// Mul is a * c (s32: low 32 bits).
func (b *Builder) Mul(a, c Reg) Reg { return b.bin(OpMul, "mul", a, c) }

// Div is a / c (s32: truncating; f32: correctly rounded).
func (b *Builder) Div(a, c Reg) Reg { return b.bin(OpDiv, "div", a, c) }

// Rem is a % c (s32).
func (b *Builder) Rem(a, c Reg) Reg {
	if a.t != S32 {
		b.fail("rem: type %v", a.t)
	}
	return b.bin(OpRem, "rem", a, c)
}

// Min is min(a, c).
func (b *Builder) Min(a, c Reg) Reg { return b.bin(OpMin, "min", a, c) }

// Max is max(a, c).
func (b *Builder) Max(a, c Reg) Reg { return b.bin(OpMax, "max", a, c) }

// Fma is a*c + d in f32 with one rounding.
func (b *Builder) Fma(a, c, d Reg) Reg {
	if a.t != F32 || c.t != F32 || d.t != F32 {
		b.fail("fma: want f32")
	}
	return b.instr(OpFma, F32, a, c, d)
}

func (b *Builder) unF(op Op, name string, a Reg) Reg {
	if a.t != F32 {
		b.fail("%s: want f32, got %v", name, a.t)
	}
	return b.instr(op, F32, a)
}

// Neg is -a (f32).
func (b *Builder) Neg(a Reg) Reg { return b.unF(OpNeg, "neg", a) }

// Abs is |a| (f32).
func (b *Builder) Abs(a Reg) Reg { return b.unF(OpAbs, "abs", a) }

// Sqrt is the correctly rounded square root (f32).
func (b *Builder) Sqrt(a Reg) Reg { return b.unF(OpSqrt, "sqrt", a) }

// Ex2 is 2^a (f32, approximate).
func (b *Builder) Ex2(a Reg) Reg { return b.unF(OpEx2, "ex2", a) }

// Lg2 is log2(a) (f32, approximate).
func (b *Builder) Lg2(a Reg) Reg { return b.unF(OpLg2, "lg2", a) }

// Exp is e^a via ex2.
func (b *Builder) Exp(a Reg) Reg { return b.Ex2(b.Mul(a, b.F(float32(math.Log2E)))) }

// Log is ln(a) via lg2.
func (b *Builder) Log(a Reg) Reg { return b.Mul(b.Lg2(a), b.F(float32(math.Ln2))) }

// Shl is a << c (s32).
func (b *Builder) Shl(a, c Reg) Reg { return b.bin(OpShl, "shl", a, c) }

// Shr is a >> c (s32, arithmetic).
func (b *Builder) Shr(a, c Reg) Reg { return b.bin(OpShr, "shr", a, c) }

// And is the bitwise (s32) or logical (pred) and.
func (b *Builder) And(a, c Reg) Reg {
	b.same("and", a, c)
	return b.instr(OpAnd, a.t, a, c)
}

// Or is the bitwise (s32) or logical (pred) or.
func (b *Builder) Or(a, c Reg) Reg {
	b.same("or", a, c)
	return b.instr(OpOr, a.t, a, c)
}

// Not negates a predicate.
func (b *Builder) Not(a Reg) Reg {
	if a.t != Pred {
		b.fail("not: want pred")
	}
	return b.instr(OpNot, Pred, a)
}

// Setp compares a and c.
func (b *Builder) Setp(cmp Cmp, a, c Reg) Reg {
	b.same("setp", a, c)
	d := b.newReg(Pred)
	b.emit(Stmt{kind: sInstr, op: OpSetp, dst: d, args: []Reg{a, c}, cmp: cmp})
	return d
}

// Selp is p ? a : c.
func (b *Builder) Selp(p, a, c Reg) Reg {
	b.same("selp", a, c)
	if p.t != Pred {
		b.fail("selp: want pred")
	}
	return b.instr(OpSelp, a.t, p, a, c)
}

// CvtF converts s32 to f32.
func (b *Builder) CvtF(a Reg) Reg {
	if a.t != S32 {
		b.fail("cvtf: want s32")
	}
	return b.instr(OpCvtF, F32, a)
}

// CvtI converts f32 to s32, truncating.
func (b *Builder) CvtI(a Reg) Reg {
	if a.t != F32 {
		b.fail("cvti: want f32")
	}
	return b.instr(OpCvtI, S32, a)
}

// Ld loads the t-typed (S32 or F32) word at ptr + 4·idx from global memory.
func (b *Builder) Ld(t Type, ptr, idx Reg) Reg {
	if ptr.t != U64 || idx.t != S32 || (t != S32 && t != F32) {
		b.fail("ld: bad operand types")
	}
	return b.instr(OpLdG, t, ptr, idx)
}

// St stores v at ptr + 4·idx in global memory.
func (b *Builder) St(ptr, idx, v Reg) {
	if ptr.t != U64 || idx.t != S32 || (v.t != S32 && v.t != F32) {
		b.fail("st: bad operand types")
	}
	b.emit(Stmt{kind: sInstr, op: OpStG, args: []Reg{ptr, idx, v}})
}

// LdS loads shared float32 arr[idx].
func (b *Builder) LdS(arr int, idx Reg) Reg {
	d := b.newReg(F32)
	b.emit(Stmt{kind: sInstr, op: OpLdS, dst: d, args: []Reg{idx}, arr: arr})
	return d
}

// StS stores f32 v at shared arr[idx].
func (b *Builder) StS(arr int, idx, v Reg) {
	if v.t != F32 || idx.t != S32 {
		b.fail("sts: bad operand types")
	}
	b.emit(Stmt{kind: sInstr, op: OpStS, args: []Reg{idx, v}, arr: arr})
}

// If runs then for threads where p holds.
func (b *Builder) If(p Reg, then func()) { b.IfElse(p, then, nil) }

// IfElse runs then where p holds and els elsewhere.
func (b *Builder) IfElse(p Reg, then, els func()) {
	if p.t != Pred {
		b.fail("if: want pred")
	}
	s := Stmt{kind: sIf, cond: p}
	s.then = b.block(then)
	if els != nil {
		s.els = b.block(els)
	}
	b.emit(s)
}

func (b *Builder) block(f func()) []Stmt {
	var out []Stmt
	b.stack = append(b.stack, &out)
	f()
	b.stack = b.stack[:len(b.stack)-1]
	return out
}

// While runs body while cond (re-evaluated by running pre before each iteration) holds.
func (b *Builder) While(pre func() Reg, body func()) {
	var p Reg
	preStmts := b.block(func() { p = pre() })
	if p.t != Pred {
		b.fail("while: condition must be pred")
	}
	bodyStmts := b.block(body)
	b.emit(Stmt{kind: sLoop, cond: p, pre: preStmts, body: bodyStmts})
}

// For runs body(i) for i = start; i < end; i += step (s32 registers).
func (b *Builder) For(start, end, step Reg, body func(i Reg)) {
	i := b.Var(start)
	b.While(func() Reg { return b.Setp(LT, i, end) }, func() {
		body(i)
		b.Set(i, b.Add(i, step))
	})
}

// Barrier is bar.sync 0: every thread of the block must reach it.
func (b *Builder) Barrier() { b.emit(Stmt{kind: sBarrier}) }
