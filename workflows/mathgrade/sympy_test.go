package mathgrade

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// gexpr is a generated expression in two spellings: LaTeX for Eval, Python for sympy.
type gexpr struct{ tex, py string }

func genLeaf(r *rand.Rand) gexpr {
	switch r.IntN(5) {
	case 0, 1:
		n := r.IntN(13)
		return gexpr{strconv.Itoa(n), fmt.Sprintf("Integer(%d)", n)}
	case 2:
		p, q := 1+r.IntN(9), 2+r.IntN(9)
		return gexpr{fmt.Sprintf(`\frac{%d}{%d}`, p, q), fmt.Sprintf("Rational(%d,%d)", p, q)}
	case 3:
		n := 2 + r.IntN(11)
		return gexpr{fmt.Sprintf(`\sqrt{%d}`, n), fmt.Sprintf("sqrt(%d)", n)}
	}
	return gexpr{`\pi`, "pi"}
}

func genExpr(r *rand.Rand, depth int) gexpr {
	if depth == 0 || r.IntN(4) == 0 {
		return genLeaf(r)
	}
	a, b := genExpr(r, depth-1), genExpr(r, depth-1)
	switch r.IntN(5) {
	case 0:
		return gexpr{"(" + a.tex + ")+(" + b.tex + ")", "(" + a.py + ")+(" + b.py + ")"}
	case 1:
		return gexpr{"(" + a.tex + ")-(" + b.tex + ")", "(" + a.py + ")-(" + b.py + ")"}
	case 2:
		return gexpr{"(" + a.tex + `)\cdot(` + b.tex + ")", "(" + a.py + ")*(" + b.py + ")"}
	case 3: // divide by a non-zero denominator: 1 + a square
		d := gexpr{"1+(" + b.tex + ")^2", "1+(" + b.py + ")**2"}
		return gexpr{`\frac{` + a.tex + "}{" + d.tex + "}", "(" + a.py + ")/(" + d.py + ")"}
	}
	k := r.IntN(4)
	return gexpr{fmt.Sprintf("(%s)^{%d}", a.tex, k), fmt.Sprintf("(%s)**%d", a.py, k)}
}

// rewrite returns an expression equal to e by an identity, or a perturbed one.
func rewrite(r *rand.Rand, e gexpr) gexpr {
	switch r.IntN(5) {
	case 0: // a different expression altogether (almost always unequal)
		return genExpr(r, 2)
	case 1: // off by a millionth of itself and a thousandth: far past the tolerance
		return gexpr{"(" + e.tex + `)\cdot\frac{1000001}{1000000}+\frac{1}{1000}`, "(" + e.py + ")*Rational(1000001,1000000)+Rational(1,1000)"}
	case 2:
		return gexpr{`\frac{2\cdot(` + e.tex + ")}{2}", "(" + e.py + ")"}
	case 3:
		return gexpr{"(" + e.tex + `)\cdot\sqrt{2}\cdot\sqrt{2}/2`, "(" + e.py + ")"}
	}
	return gexpr{`\pi-\pi+(` + e.tex + ")", "(" + e.py + ")"}
}

// TestNumericAgainstSympy: on generated expressions (integers, fractions, \sqrt, \pi, sums,
// products, quotients, powers), Eval's value matches sympy's to 1e-9, an exact value is
// sympy's rational, and Value.Equal decides equality as sympy's simplify(a-b) == 0 does.
func TestNumericAgainstSympy(t *testing.T) {
	py := oracles.Sympy(t)
	r := rand.New(rand.NewPCG(29, 1))
	const n = 200
	var pairs [n][2]gexpr
	var in bytes.Buffer
	for i := range pairs {
		a := genExpr(r, 3)
		pairs[i] = [2]gexpr{a, rewrite(r, a)}
		fmt.Fprintf(&in, "%s\t%s\n", a.py, pairs[i][1].py)
	}
	script := `
import sys
from sympy import Integer, Rational, sqrt, pi, simplify, N, sympify
for line in sys.stdin:
    a, b = (sympify(eval(s)) for s in line.rstrip("\n").split("\t"))
    eq = simplify(a - b) == 0
    print(int(eq), N(a, 30), int(a.is_Rational), a if a.is_Rational else "-", sep="\t")
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("sympy: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("sympy: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	equal := 0
	for i := 0; sc.Scan(); i++ {
		f := strings.Split(sc.Text(), "\t")
		a, b := pairs[i][0], pairs[i][1]
		va, okA := Eval(a.tex)
		vb, okB := Eval(b.tex)
		if !okA || !okB {
			t.Fatalf("pair %d: Eval(%q) ok=%v, Eval(%q) ok=%v", i, a.tex, okA, b.tex, okB)
		}
		want, _ := strconv.ParseFloat(f[1], 64)
		if d := math.Abs(va.Float - want); d > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("pair %d: Eval(%q) = %v, sympy %v", i, a.tex, va.Float, f[1])
		}
		if va.Rat != nil && (f[2] != "1" || va.Rat.RatString() != f[3]) {
			t.Errorf("pair %d: Eval(%q) exact %s, sympy rational=%s %s", i, a.tex, va.Rat.RatString(), f[2], f[3])
		}
		if got := va.Equal(vb); got != (f[0] == "1") {
			t.Errorf("pair %d: Equal(%q, %q) = %v, sympy says %s", i, a.tex, b.tex, got, f[0])
		}
		if f[0] == "1" {
			equal++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pairs checked against sympy, %d equal", n, equal)
	if equal < n/3 || equal > n-n/10 {
		t.Fatalf("%d of %d pairs equal: the generator does not test both outcomes", equal, n)
	}
}
