package estimators

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Columns holds the key and score columns of one shard, row-aligned (entry i of every slice
// describes row i), as the normalize stage decodes them.
type Columns struct {
	// Group is the dense uid code. Rows of one group must be contiguous (shards are sorted by
	// uid); codes need not be increasing.
	Group []int32
	// Traj is the dense trajectory code. A trajectory is identified by (Group, Traj), so a code
	// may be reused in another group. Nil when no estimator reads trajectories (only grpo does:
	// Spec.UsesTraj); ComputeMany refuses a grpo spec then.
	Traj []int32
	// Agent is the dense agent code, 0..NumAgents-1.
	Agent []int32
	// Score is the row's score (episode reward minus invalid-action penalty). Must be finite.
	Score     []float64
	NumAgents int
}

// Len is the number of rows (the length of Score).
func (c *Columns) Len() int { return len(c.Score) }

// shapeOK reports whether the column lengths agree (Traj may be nil) and NumAgents is not
// negative: what ComputeMany checks before reading any row.
func (c *Columns) shapeOK() bool {
	n := len(c.Score)
	return len(c.Group) == n && (c.Traj == nil || len(c.Traj) == n) && len(c.Agent) == n && c.NumAgents >= 0
}

// maxListed is how many row indices a problem lists before summarising.
const maxListed = 5

// ValidationError lists every problem found in a Columns, each a sentence naming rows.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "estimators: invalid columns: " + strings.Join(e.Problems, "; ")
}

// rowList collects up to maxListed row descriptions and counts the rest.
type rowList struct {
	items []string
	n     int
}

func (l *rowList) add(s string) {
	if l.n < maxListed {
		l.items = append(l.items, s)
	}
	l.n++
}

func (l *rowList) String() string {
	s := strings.Join(l.items, ", ")
	if l.n > len(l.items) {
		s += fmt.Sprintf(", … (%d rows in all)", l.n)
	}
	return s
}

// Validate checks the columns and reports every problem at once: column length mismatch,
// non-finite scores, negative codes, agent codes not below NumAgents, and groups whose rows are
// not contiguous. It returns nil or a *ValidationError.
func (c *Columns) Validate() error {
	var probs []string
	n := len(c.Score)
	if len(c.Group) != n || (c.Traj != nil && len(c.Traj) != n) || len(c.Agent) != n {
		probs = append(probs, fmt.Sprintf("column lengths differ: Score has %d rows, Group %d, Traj %d, Agent %d",
			n, len(c.Group), len(c.Traj), len(c.Agent)))
	}
	if c.NumAgents < 0 || (c.NumAgents == 0 && len(c.Agent) > 0) {
		probs = append(probs, fmt.Sprintf("NumAgents is %d but there are %d rows", c.NumAgents, len(c.Agent)))
	}
	var bad rowList
	for i, x := range c.Score {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			bad.add(fmt.Sprintf("row %d (%v)", i, x))
		}
	}
	if bad.n > 0 {
		probs = append(probs, "non-finite score at "+bad.String())
	}
	for _, col := range []struct {
		name string
		v    []int32
	}{{"Group", c.Group}, {"Traj", c.Traj}, {"Agent", c.Agent}} {
		var neg rowList
		for i, v := range col.v {
			if v < 0 {
				neg.add(fmt.Sprintf("row %d (%d)", i, v))
			}
		}
		if neg.n > 0 {
			probs = append(probs, fmt.Sprintf("negative %s code at %s", col.name, neg.String()))
		}
	}
	if c.NumAgents > 0 {
		var big rowList
		for i, v := range c.Agent {
			if int(v) >= c.NumAgents {
				big.add(fmt.Sprintf("row %d (%d)", i, v))
			}
		}
		if big.n > 0 {
			probs = append(probs, fmt.Sprintf("Agent code not below NumAgents=%d at %s", c.NumAgents, big.String()))
		}
	}
	// Contiguity: a group code may start only one run.
	var split rowList
	end := make(map[int32]int) // group code → row after its run
	for i := 0; i < len(c.Group); {
		g := c.Group[i]
		j := i + 1
		for j < len(c.Group) && c.Group[j] == g {
			j++
		}
		if e, ok := end[g]; ok {
			split.add(fmt.Sprintf("group %d resumes at row %d after its rows ended at row %d", g, i, e-1))
		} else {
			end[g] = j
		}
		i = j
	}
	if split.n > 0 {
		probs = append(probs, "rows of a group are not contiguous (shards must be sorted by uid): "+split.String())
	}
	if len(probs) == 0 {
		return nil
	}
	return &ValidationError{Problems: probs}
}

// checkRunCodes reports whether any group code starts more than one run. codes are the run
// start codes in order (all ≥ 0); maxCode their maximum. bits and sorted are reusable scratch.
func checkRunCodes(codes []int32, maxCode int32, rows int, bits *[]uint64, sorted *[]int32) bool {
	if len(codes) < 2 {
		return true
	}
	if int64(maxCode) <= 16*int64(rows)+4096 {
		words := int(maxCode)/64 + 1
		if cap(*bits) < words {
			*bits = make([]uint64, words)
		}
		b := (*bits)[:words]
		clear(b)
		for _, g := range codes {
			w, m := g>>6, uint64(1)<<(g&63)
			if b[w]&m != 0 {
				return false
			}
			b[w] |= m
		}
		return true
	}
	s := append((*sorted)[:0], codes...)
	*sorted = s
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return false
		}
	}
	return true
}
