package mathgrade

import (
	"errors"
	"math"
	"math/big"
	"strings"
)

// Limits of the expression reader: longer or deeper answers are compared as strings only.
const (
	MaxExprBytes = 512
	MaxDepth     = 32
	maxExponent  = 64   // |n| of an exact power x^n
	maxRatBits   = 4096 // numerator or denominator size kept exact
)

// Value is a number read from an answer: exact when Rat is non-nil, else only Float (an
// irrational such as \sqrt{2} or \pi, or an exact value grown too large).
type Value struct {
	Rat   *big.Rat
	Float float64
}

var errSyntax = errors.New("mathgrade: not a simple expression")

// Eval reads a normalized answer as a number: integers, decimals (1,000 thousands commas
// allowed), \frac{a}{b}, a/b, \sqrt{x}, \sqrt[n]{x}, \pi, parentheses and braces, + - * / ^,
// \cdot, \times and implicit products (2\sqrt{3}, 3\pi). ok is false for anything else
// (letters, functions, tuples), for a result that is not finite, and past MaxExprBytes or
// MaxDepth.
func Eval(s string) (Value, bool) {
	s = stripThousands(strings.ReplaceAll(s, " ", ""))
	if s == "" || len(s) > MaxExprBytes {
		return Value{}, false
	}
	p := &parser{s: s}
	v, err := p.expr(0)
	if err != nil || p.i != len(p.s) || math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
		return Value{}, false
	}
	return v, true
}

// Equal compares two values: exactly when both are exact, else within a relative 1e-9 (and an
// absolute 1e-12, so that \sqrt{2}\cdot\sqrt{2}-2, which rounds to 4e-16, equals 0).
func (v Value) Equal(w Value) bool {
	if v.Rat != nil && w.Rat != nil {
		return v.Rat.Cmp(w.Rat) == 0
	}
	d := math.Abs(v.Float - w.Float)
	return d <= math.Max(1e-9*math.Max(math.Abs(v.Float), math.Abs(w.Float)), 1e-12)
}

func exact(r *big.Rat) Value {
	if r.Num().BitLen() > maxRatBits || r.Denom().BitLen() > maxRatBits {
		f, _ := r.Float64()
		return Value{Float: f}
	}
	f, _ := r.Float64()
	return Value{Rat: r, Float: f}
}

func inexact(f float64) Value { return Value{Float: f} }

type parser struct {
	s string
	i int
}

func (p *parser) peek(tok string) bool { return strings.HasPrefix(p.s[p.i:], tok) }

func (p *parser) eat(tok string) bool {
	if p.peek(tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *parser) expr(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, errSyntax
	}
	v, err := p.term(depth)
	if err != nil {
		return v, err
	}
	for {
		switch {
		case p.eat("+"):
			w, err := p.term(depth)
			if err != nil {
				return w, err
			}
			v = add(v, w, 1)
		case p.eat("-"):
			w, err := p.term(depth)
			if err != nil {
				return w, err
			}
			v = add(v, w, -1)
		default:
			return v, nil
		}
	}
}

func (p *parser) term(depth int) (Value, error) {
	v, err := p.unary(depth)
	if err != nil {
		return v, err
	}
	for {
		div := false
		switch {
		case p.eat("*"), p.eat(`\cdot`), p.eat(`\times`):
		case p.eat("/"), p.eat(`\div`):
			div = true
		case p.startsAtom():
		default:
			return v, nil
		}
		w, err := p.unary(depth)
		if err != nil {
			return w, err
		}
		if v, err = mul(v, w, div); err != nil {
			return v, err
		}
	}
}

// startsAtom: what may follow a factor as an implicit product.
func (p *parser) startsAtom() bool {
	for _, t := range []string{`\frac`, `\sqrt`, `\pi`, "pi", "(", "{"} {
		if p.peek(t) {
			return true
		}
	}
	return false
}

func (p *parser) unary(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, errSyntax
	}
	if p.eat("-") {
		v, err := p.unary(depth + 1)
		return neg(v), err
	}
	if p.eat("+") {
		return p.unary(depth + 1)
	}
	base, err := p.atom(depth)
	if err != nil || !p.eat("^") {
		return base, err
	}
	var e Value
	if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		e = exact(new(big.Rat).SetInt64(int64(p.s[p.i] - '0'))) // x^23 is x²·3, as in TeX
		p.i++
	} else if e, err = p.unary(depth + 1); err != nil {
		return e, err
	}
	return pow(base, e), nil
}

func (p *parser) atom(depth int) (Value, error) {
	switch {
	case p.eat(`\frac`):
		a, err := p.group(depth)
		if err != nil {
			return a, err
		}
		b, err := p.group(depth)
		if err != nil {
			return b, err
		}
		return mul(a, b, true)
	case p.eat(`\sqrt`):
		n := exact(big.NewRat(2, 1))
		if p.eat("[") {
			var err error
			if n, err = p.expr(depth + 1); err != nil || !p.eat("]") {
				return Value{}, errSyntax
			}
		}
		x, err := p.group(depth)
		if err != nil {
			return x, err
		}
		return root(x, n), nil
	case p.eat(`\pi`), p.eat("pi"):
		return inexact(math.Pi), nil
	case p.eat("("):
		return p.closed(depth, ")")
	case p.eat("{"):
		return p.closed(depth, "}")
	}
	return p.number()
}

func (p *parser) closed(depth int, end string) (Value, error) {
	v, err := p.expr(depth + 1)
	if err != nil || !p.eat(end) {
		return Value{}, errSyntax
	}
	return v, nil
}

// group reads a {…} argument, or a single digit (\frac12 after normalization is braced, but
// \sqrt[3]8 is not).
func (p *parser) group(depth int) (Value, error) {
	if p.eat("{") {
		return p.closed(depth, "}")
	}
	if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
		return exact(new(big.Rat).SetInt64(int64(p.s[p.i-1] - '0'))), nil
	}
	return Value{}, errSyntax
}

func (p *parser) number() (Value, error) {
	start := p.i
	digits := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
		digits++
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			digits++
		}
	}
	if digits == 0 {
		p.i = start
		return Value{}, errSyntax
	}
	r, ok := new(big.Rat).SetString(strings.TrimSuffix(p.s[start:p.i], "."))
	if !ok {
		return Value{}, errSyntax
	}
	return exact(r), nil
}

func neg(v Value) Value {
	if v.Rat != nil {
		return exact(new(big.Rat).Neg(v.Rat))
	}
	return inexact(-v.Float)
}

func add(v, w Value, sign int64) Value {
	if sign < 0 {
		w = neg(w)
	}
	if v.Rat != nil && w.Rat != nil {
		return exact(new(big.Rat).Add(v.Rat, w.Rat))
	}
	return inexact(v.Float + w.Float)
}

func mul(v, w Value, div bool) (Value, error) {
	if div {
		if (w.Rat != nil && w.Rat.Sign() == 0) || w.Float == 0 && w.Rat == nil {
			return Value{}, errSyntax
		}
		if v.Rat != nil && w.Rat != nil {
			return exact(new(big.Rat).Quo(v.Rat, w.Rat)), nil
		}
		return inexact(v.Float / w.Float), nil
	}
	if v.Rat != nil && w.Rat != nil {
		return exact(new(big.Rat).Mul(v.Rat, w.Rat)), nil
	}
	return inexact(v.Float * w.Float), nil
}

// pow is exact for an exact base and a small integer exponent.
func pow(b, e Value) Value {
	if b.Rat != nil && e.Rat != nil && e.Rat.IsInt() && e.Rat.Num().IsInt64() {
		n := e.Rat.Num().Int64()
		if n >= -maxExponent && n <= maxExponent && !(n < 0 && b.Rat.Sign() == 0) {
			r := new(big.Rat).SetInt64(1)
			for k := int64(0); k < abs(n); k++ {
				r.Mul(r, b.Rat)
				if r.Num().BitLen() > maxRatBits || r.Denom().BitLen() > maxRatBits {
					return inexact(math.Pow(b.Float, e.Float))
				}
			}
			if n < 0 {
				r.Inv(r)
			}
			return exact(r)
		}
	}
	return inexact(math.Pow(b.Float, e.Float))
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// root is the n-th root, exact when x is an exact n-th power of a rational.
func root(x, n Value) Value {
	if x.Rat != nil && n.Rat != nil && n.Rat.IsInt() && n.Rat.Num().IsInt64() {
		k := n.Rat.Num().Int64()
		if k >= 1 && k <= maxExponent && (x.Rat.Sign() >= 0 || k%2 == 1) {
			num, okN := intRoot(new(big.Int).Abs(x.Rat.Num()), k)
			den, okD := intRoot(x.Rat.Denom(), k)
			if okN && okD {
				r := new(big.Rat).SetFrac(num, den)
				if x.Rat.Sign() < 0 {
					r.Neg(r)
				}
				return exact(r)
			}
		}
		if k%2 == 1 && x.Float < 0 {
			return inexact(-math.Pow(-x.Float, 1/float64(k)))
		}
	}
	if n.Float == 2 {
		return inexact(math.Sqrt(x.Float))
	}
	return inexact(math.Pow(x.Float, 1/n.Float))
}

// intRoot returns the integer k-th root of a when a is a perfect k-th power.
func intRoot(a *big.Int, k int64) (*big.Int, bool) {
	if a.Sign() == 0 || k == 1 {
		return new(big.Int).Set(a), true
	}
	if a.BitLen() > maxRatBits {
		return nil, false
	}
	// Newton's iteration from above on the k-th root.
	kk := big.NewInt(k)
	x := new(big.Int).Lsh(big.NewInt(1), uint(a.BitLen()/int(k)+1))
	for {
		// y = ((k-1)·x + a / x^(k-1)) / k
		xk1 := new(big.Int).Exp(x, big.NewInt(k-1), nil)
		y := new(big.Int).Mul(x, big.NewInt(k-1))
		y.Add(y, new(big.Int).Quo(a, xk1))
		y.Quo(y, kk)
		if y.Cmp(x) >= 0 {
			break
		}
		x = y
	}
	if new(big.Int).Exp(x, kk, nil).Cmp(a) == 0 {
		return x, true
	}
	return nil, false
}

// stripThousands removes commas that separate thousands: a digit, a comma, three digits and
// then no digit (1,000,000 but not (1,2) or 1,23).
func stripThousands(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && i > 0 && i+3 < len(s) && isDigit(s[i-1]) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) &&
			(i+4 == len(s) || !isDigit(s[i+4])) {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
