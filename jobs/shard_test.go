package jobs

import (
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Shard
		wantErr string
	}{
		{in: "0/1", want: Shard{0, 1}},
		{in: "3/4", want: Shard{3, 4}},
		{in: " 2 / 5 ", want: Shard{2, 5}},
		{in: "0/100000", want: Shard{0, 100000}},
		{in: "4/4", wantErr: "index must be in [0, 4)"},
		{in: "-1/4", wantErr: "index must be in [0, 4)"},
		{in: "0/0", wantErr: "count must be at least 1"},
		{in: "0/-2", wantErr: "count must be at least 1"},
		{in: "0/100001", wantErr: "count must be at most"},
		{in: "3", wantErr: "want i/n"},
		{in: "", wantErr: "want i/n"},
		{in: "a/4", wantErr: `index "a" is not an integer`},
		{in: "1/b", wantErr: `count "b" is not an integer`},
		{in: "1/2/3", wantErr: "is not an integer"},
	} {
		got, err := ParseShard(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseShard(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseShard(got.String()); err != nil || back != got {
			t.Errorf("ParseShard(%q.String()) = %v, %v", tc.in, back, err)
		}
	}
}

func TestShardFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Shard
		wantOK  bool
		wantErr string
	}{
		{name: "unset", env: nil},
		{name: "other vars only", env: map[string]string{"HOME": "/root"}},
		{name: "indexed pod", env: map[string]string{EnvCompletionIndex: "2", EnvShardCount: "4"}, want: Shard{2, 4}, wantOK: true},
		{name: "single pod", env: map[string]string{EnvCompletionIndex: "0", EnvShardCount: "1"}, want: Shard{0, 1}, wantOK: true},
		{name: "index without count", env: map[string]string{EnvCompletionIndex: "1"}, wantErr: EnvShardCount + " is not"},
		{name: "count without index", env: map[string]string{EnvShardCount: "4"}, wantErr: EnvCompletionIndex + " is not"},
		{name: "index out of range", env: map[string]string{EnvCompletionIndex: "4", EnvShardCount: "4"}, wantErr: "index must be in [0, 4)"},
		{name: "zero count", env: map[string]string{EnvCompletionIndex: "0", EnvShardCount: "0"}, wantErr: "count must be at least 1"},
		{name: "bad index", env: map[string]string{EnvCompletionIndex: "x", EnvShardCount: "4"}, wantErr: "not an integer"},
		{name: "bad count", env: map[string]string{EnvCompletionIndex: "0", EnvShardCount: ""}, wantErr: "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			got, ok, err := ShardFromEnv(lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v, %v; want error containing %q", got, ok, err, tc.wantErr)
				}
				if ok {
					t.Fatal("ok with an error")
				}
				return
			}
			if err != nil || ok != tc.wantOK || got != tc.want {
				t.Fatalf("got %v, %v, %v; want %v, %v", got, ok, err, tc.want, tc.wantOK)
			}
		})
	}
}

// Every part is owned by exactly one index of a shard count, and Parts agrees with Owns.
func TestOwnsPartitions(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for _, total := range []int{0, 1, n - 1, n, n + 1, 3*n + 2, 64} {
			owners := make([]int, total)
			for i := range n {
				s := Shard{i, n}
				var want []int
				for p := range total {
					if s.Owns(p) {
						owners[p]++
						want = append(want, p)
					}
				}
				got := s.Parts(total)
				if len(got) != len(want) {
					t.Fatalf("%v.Parts(%d) = %v, want %v", s, total, got, want)
				}
				for k := range got {
					if got[k] != want[k] {
						t.Fatalf("%v.Parts(%d) = %v, want %v", s, total, got, want)
					}
				}
			}
			for p, c := range owners {
				if c != 1 {
					t.Fatalf("n=%d: part %d owned %d times", n, p, c)
				}
			}
		}
	}
	if (Shard{0, 2}).Owns(-2) || (Shard{}).Owns(0) {
		t.Fatal("negative parts or an invalid shard own something")
	}
	if Whole.Validate() != nil || !Whole.Owns(17) {
		t.Fatal("Whole must own everything")
	}
}

// TestPartsOfInvalidShards: Parts agrees with Owns on shards Validate refuses: they own nothing
// (an index ≥ the count used to get the parts index, index+count, … of other shards).
func TestPartsOfInvalidShards(t *testing.T) {
	for _, s := range []Shard{{5, 2}, {2, 2}, {-1, 3}, {0, 0}, {}} {
		if got := s.Parts(10); len(got) != 0 {
			t.Errorf("%v.Parts(10) = %v, want none", s, got)
		}
		for p := range 10 {
			if s.Owns(p) {
				t.Errorf("%v owns part %d", s, p)
			}
		}
	}
}
