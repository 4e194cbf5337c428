package workflows

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"math", "math_critic", "search"}) {
		t.Fatalf("names %v", got)
	}
	if _, err := New("nope", DefaultOptions()); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err %v", err)
	}
	for _, name := range Names() {
		w := newWF(t, name, nil)
		if w.Name() != name || len(w.Agents()) < 2 {
			t.Fatalf("%s: %v", name, w.Agents())
		}
	}
	m, s := newWF(t, "math", nil), newWF(t, "search", nil)
	if m.InvalidPenalty() != 0.1 || s.InvalidPenalty() != 0.01 {
		t.Fatal("penalties")
	}
	if !reflect.DeepEqual(s.Agents(), []string{"router", "searcher", "answerer"}) || !reflect.DeepEqual(m.Agents(), []string{"solver", "verifier"}) {
		t.Fatal("agent order")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("duplicate Register did not panic")
			}
		}()
		Register("math", func(Options) (Workflow, error) { return nil, nil })
	}()
}

func TestOptionsValidate(t *testing.T) {
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.MaxLoop != 2 || d.MaxSteps != 4 || d.TopK != 1 || d.HardFrac != 0.5 || d.CorpusSeed != 1 || d.CorpusPeople != 200 {
		t.Fatalf("defaults %+v", d)
	}
	if err := (Options{}).Validate(); err == nil {
		t.Fatal("zero options accepted")
	}
	bad := []func(*Options){
		func(o *Options) { o.MaxLoop = 0 }, func(o *Options) { o.MaxLoop = 9 },
		func(o *Options) { o.MaxSteps = 0 }, func(o *Options) { o.TopK = 3 },
		func(o *Options) { o.HardFrac = -0.1 }, func(o *Options) { o.HardFrac = math.NaN() },
		func(o *Options) { o.CorpusPeople = 5 }, func(o *Options) { o.CorpusPeople = 12 },
	}
	for i, mod := range bad {
		o := DefaultOptions()
		mod(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("case %d accepted: %+v", i, o)
		}
		if _, err := New("math", o); err == nil {
			t.Errorf("case %d: New accepted", i)
		}
	}
	o := DefaultOptions()
	o.MaxLoop, o.TopK = 0, 9
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "max_loop") || !strings.Contains(err.Error(), "top_k") {
		t.Fatalf("not all errors reported: %v", err)
	}
	if s, err := ParseSplit("eval"); err != nil || s != Eval || s.String() != "eval" {
		t.Fatal("ParseSplit")
	}
	if _, err := ParseSplit("test"); err == nil {
		t.Fatal("ParseSplit accepted test")
	}
}
