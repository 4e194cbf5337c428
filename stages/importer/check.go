package importer

// checker runs the checks that span rows, one record at a time in file order, and derives
// the sample of trajectories whose input has none.
type checker struct {
	unit  string
	p     *problems
	keys  map[rowKey]int
	trajs map[string]*traj
	slots map[slot]string // explicit samples: (uid, sample) → traj_uid
	next  map[string]int32
	// firstWith / firstWithout: the first row that gives / lacks a sample (−1: none yet).
	firstWith, firstWithout int
	mixReported             bool
	agents                  []string
	agentCode               map[string]int
}

type rowKey struct {
	traj, agent string
	step        int32
}

type slot struct {
	uid    string
	sample int32
}

type traj struct {
	uid      string
	pos      int
	sample   int32
	explicit bool
}

func newChecker(unit string, p *problems) *checker {
	return &checker{
		unit: unit, p: p,
		keys: map[rowKey]int{}, trajs: map[string]*traj{}, slots: map[slot]string{}, next: map[string]int32{},
		firstWith: -1, firstWithout: -1, agentCode: map[string]int{},
	}
}

// add checks r against the rows before it and sets its sample.
func (c *checker) add(r *rec) {
	row := &r.row
	pos := r.pos
	if r.hasSample {
		if c.firstWith < 0 {
			c.firstWith = pos
		}
	} else if c.firstWithout < 0 {
		c.firstWithout = pos
	}
	if c.firstWith >= 0 && c.firstWithout >= 0 && !c.mixReported {
		c.mixReported = true
		c.p.add(pos, "sample is given on %s %d but not on %s %d: give it on every row or on none",
			c.unit, c.firstWith, c.unit, c.firstWithout)
	}
	t, seen := c.trajs[row.TrajUID]
	switch {
	case !seen && r.hasSample:
		s := slot{row.UID, row.Sample}
		if other, taken := c.slots[s]; taken {
			c.p.add(pos, "traj_uid %s and traj_uid %s (%s %d) both have sample %d in uid %s",
				quote(row.TrajUID), quote(other), c.unit, c.trajs[other].pos, row.Sample, quote(row.UID))
		} else {
			c.slots[s] = row.TrajUID
		}
		t = &traj{uid: row.UID, pos: pos, sample: row.Sample, explicit: true}
		c.trajs[row.TrajUID] = t
	case !seen:
		t = &traj{uid: row.UID, pos: pos, sample: c.next[row.UID]}
		c.next[row.UID]++
		c.trajs[row.TrajUID] = t
	default:
		if t.uid != row.UID {
			c.p.add(pos, "traj_uid %s is under uid %s here but under uid %s on %s %d",
				quote(row.TrajUID), quote(row.UID), quote(t.uid), c.unit, t.pos)
		}
		if r.hasSample && t.explicit && row.Sample != t.sample {
			c.p.add(pos, "traj_uid %s has sample %d here but sample %d on %s %d",
				quote(row.TrajUID), row.Sample, t.sample, c.unit, t.pos)
		}
	}
	row.Sample = t.sample
	k := rowKey{row.TrajUID, row.Agent, row.Step}
	if prev, dup := c.keys[k]; dup {
		c.p.add(pos, "duplicate (traj_uid %s, step %d, agent %s): also on %s %d", quote(row.TrajUID), row.Step, quote(row.Agent), c.unit, prev)
	} else {
		c.keys[k] = pos
	}
	if _, ok := c.agentCode[row.Agent]; !ok {
		c.agentCode[row.Agent] = len(c.agents)
		c.agents = append(c.agents, row.Agent)
	}
}
