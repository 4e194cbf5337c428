package seeds

import "testing"

// TestGolden pins the derivation, worked outside Go (Python's hashlib): the first 8 bytes, read
// little-endian, of sha256(root as 8 little-endian bytes ‖ "|string:eval|int64:3|…"). Seeds
// and prompt-group ids are stored and compared across machines and versions: a change here
// changes every run's bytes.
func TestGolden(t *testing.T) {
	if got := Derive(1, "eval", int64(3), "math-eval-0001", 0, 1); got != 6684835186010516761 {
		t.Errorf("Derive = %d, want 6684835186010516761", got)
	}
	if got := ID("t", 2, "math-0003"); got != "d9a001700653222c" {
		t.Errorf("ID = %s, want d9a001700653222c", got)
	}
}

// TestPartsAreSeparated: parts are delimited and typed, so neighbouring parts that concatenate
// to the same digits (iteration 1 task 23, iteration 12 task 3), a string that spells an int,
// and one part split in two all derive different seeds.
func TestPartsAreSeparated(t *testing.T) {
	cases := [][]any{
		{"rollout", 1, 23}, {"rollout", 12, 3}, {"rollout", 123}, {"rollout", "1", 23},
		{"rollout", int64(1), 23}, {"rollout1", 23}, {"rollout", 1, 23, 0},
	}
	seen := map[uint64]int{}
	for i, c := range cases {
		s := Derive(7, c...)
		if j, ok := seen[s]; ok {
			t.Errorf("Derive(7, %v) = Derive(7, %v)", c, cases[j])
		}
		seen[s] = i
	}
	if Derive(7, "a") == Derive(8, "a") {
		t.Error("the root seed does not change the derivation")
	}
}
