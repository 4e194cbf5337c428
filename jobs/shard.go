package jobs

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables that select a worker's shard. Kubernetes Indexed Jobs set
// JOB_COMPLETION_INDEX in every pod; the shard count is not exposed by Kubernetes, so the
// rendered Job sets DRMAS_SHARD_COUNT to its completions explicitly.
const (
	EnvCompletionIndex = "JOB_COMPLETION_INDEX"
	EnvShardCount      = "DRMAS_SHARD_COUNT"
)

// MaxShards bounds the shard count (Kubernetes caps Indexed Jobs that use
// backoffLimitPerIndex at 100 000 completions).
const MaxShards = 100000

// Shard is one worker's slice of a stage: worker Index of Count. The zero value is invalid;
// use Whole for an unsharded run.
type Shard struct {
	Index, Count int
}

// Whole is the shard of an unsharded run: worker 0 of 1 owns every part.
var Whole = Shard{Index: 0, Count: 1}

// String formats s as "i/n", the form ParseShard reads.
func (s Shard) String() string { return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count) }

// Validate reports whether 0 ≤ Index < Count and 1 ≤ Count ≤ MaxShards.
func (s Shard) Validate() error {
	switch {
	case s.Count < 1:
		return fmt.Errorf("shard %s: count must be at least 1", s)
	case s.Count > MaxShards:
		return fmt.Errorf("shard %s: count must be at most %d", s, MaxShards)
	case s.Index < 0 || s.Index >= s.Count:
		return fmt.Errorf("shard %s: index must be in [0, %d)", s, s.Count)
	}
	return nil
}

// Owns reports whether part belongs to this shard: part mod Count == Index. Across the
// indices 0..Count-1 every part ≥ 0 is owned exactly once. Negative parts are owned by no one.
func (s Shard) Owns(part int) bool {
	if part < 0 || s.Count < 1 {
		return false
	}
	return part%s.Count == s.Index
}

// Parts returns the parts of 0..total-1 this shard owns, in order: none for an invalid shard,
// as Owns says.
func (s Shard) Parts(total int) []int {
	var out []int
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return out
	}
	for p := s.Index; p < total; p += s.Count {
		out = append(out, p)
	}
	return out
}

// ParseShard reads "i/n" (worker i of n, 0 ≤ i < n), as given to --shard.
func ParseShard(v string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want i/n, e.g. 0/4 (worker 0 of 4)", v)
	}
	i, err := strconv.Atoi(strings.TrimSpace(is))
	if err != nil {
		return Shard{}, fmt.Errorf("shard %q: index %q is not an integer", v, is)
	}
	n, err := strconv.Atoi(strings.TrimSpace(ns))
	if err != nil {
		return Shard{}, fmt.Errorf("shard %q: count %q is not an integer", v, ns)
	}
	s := Shard{Index: i, Count: n}
	if err := s.Validate(); err != nil {
		return Shard{}, err
	}
	return s, nil
}

// ShardFromEnv reads the shard of a Kubernetes Indexed Job pod: the index from
// JOB_COMPLETION_INDEX and the count from DRMAS_SHARD_COUNT. lookup is os.LookupEnv or a fake.
//
// ok is false, with no error, when neither variable is set (not running as an indexed
// worker). A count without an index, or an index without a count, is an error: the count
// cannot be guessed, and an index alone would silently make every pod process every part.
func ShardFromEnv(lookup func(string) (string, bool)) (s Shard, ok bool, err error) {
	is, hasIndex := lookup(EnvCompletionIndex)
	ns, hasCount := lookup(EnvShardCount)
	switch {
	case !hasIndex && !hasCount:
		return Shard{}, false, nil
	case !hasCount:
		return Shard{}, false, fmt.Errorf("%s=%s is set but %s is not: set it to the Job's completions", EnvCompletionIndex, is, EnvShardCount)
	case !hasIndex:
		return Shard{}, false, fmt.Errorf("%s=%s is set but %s is not (set by Kubernetes Indexed Jobs)", EnvShardCount, ns, EnvCompletionIndex)
	}
	i, err := strconv.Atoi(strings.TrimSpace(is))
	if err != nil {
		return Shard{}, false, fmt.Errorf("%s=%q is not an integer", EnvCompletionIndex, is)
	}
	n, err := strconv.Atoi(strings.TrimSpace(ns))
	if err != nil {
		return Shard{}, false, fmt.Errorf("%s=%q is not an integer", EnvShardCount, ns)
	}
	s = Shard{Index: i, Count: n}
	if err := s.Validate(); err != nil {
		return Shard{}, false, fmt.Errorf("from %s and %s: %w", EnvCompletionIndex, EnvShardCount, err)
	}
	return s, true, nil
}
