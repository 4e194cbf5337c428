package workflows

import (
	"math"
	"strings"
	"testing"
)

func TestAvgPassAtK(t *testing.T) {
	var s []Sample
	add := func(id, src string, succ ...bool) {
		for _, b := range succ {
			s = append(s, Sample{id, src, b})
		}
	}
	add("a", "x", true, false, false, false)
	add("b", "x", false, false, false, false)
	add("c", "y", true, true, true, true)
	avg, err := AvgAtK(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if avg["x"].Value != 0.125 || avg["x"].Prompts != 2 || avg["x"].Samples != 8 || avg["y"].Value != 1 {
		t.Fatalf("avg %+v", avg)
	}
	pass, err := PassAtK(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if pass["x"].Value != 0.5 || pass["y"].Value != 1 {
		t.Fatalf("pass %+v", pass)
	}
	// Unbiased estimator with n > k: n=4, c=1, k=2 → 1 − C(3,2)/C(4,2) = 1 − 3/6 = 0.5.
	pass, _ = PassAtK(s, 2)
	if math.Abs(pass["x"].Value-0.25) > 1e-12 {
		t.Fatalf("pass@2 %+v", pass)
	}
	pass, _ = PassAtK(s, 1) // pass@1 = avg
	if math.Abs(pass["x"].Value-0.125) > 1e-12 {
		t.Fatalf("pass@1 %+v", pass)
	}
	if _, err := PassAtK(s, 5); err == nil || !strings.Contains(err.Error(), "fewer than k=5") {
		t.Fatalf("err %v", err)
	}
	if _, err := AvgAtK(append(s, Sample{"a", "y", true}), 1); err == nil {
		t.Fatal("task with two sources accepted")
	}
	if _, err := AvgAtK(s, 0); err == nil {
		t.Fatal("k=0 accepted")
	}
	if m, err := AvgAtK(nil, 16); err != nil || len(m) != 0 {
		t.Fatal("empty")
	}
}
