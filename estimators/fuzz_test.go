package estimators

import (
	"context"
	"math"
	"slices"
	"testing"
)

// fuzzColumns decodes bytes into small Columns. data[0] is a header: NumAgents = 1 + h%4;
// bit 5 makes rows 4 bytes with wide scores (below); bit 6 keeps raw agent codes (0..3,
// possibly ≥ NumAgents); bit 7 drops the last score (length mismatch). Each further 3 bytes
// (b0, b1, b2) are a row: b0&1 starts a new group with code b0>>1 (the first row always starts
// one; a code seen before makes the groups non-contiguous); b1>>2 is the trajectory code (63
// means −1); b1&3 the agent; b2 the score int8(b2)/8, except 0x80 = NaN and 0x7f = +Inf. With
// bit 5 a fourth byte b3 scales the score instead: int8(b2)/10 · 10^(int8(b3)·308/127), scores
// that are not multiples of a power of two, of any magnitude from subnormal to overflowing
// (±Inf), mixed in a group (cancellation, overflow of sums and of float32 advantages).
func fuzzColumns(data []byte) *Columns {
	if len(data) == 0 {
		return &Columns{NumAgents: 1}
	}
	h := data[0]
	data = data[1:]
	c := &Columns{NumAgents: 1 + int(h%4)}
	wide := h&0x20 != 0
	row := 3
	if wide {
		row = 4
	}
	g := int32(0)
	for i := 0; i+row <= len(data) && i < row*256; i += row {
		b0, b1, b2 := data[i], data[i+1], data[i+2]
		if i == 0 || b0&1 == 1 {
			g = int32(b0 >> 1)
		}
		traj := int32(b1 >> 2)
		if traj == 63 {
			traj = -1
		}
		agent := int32(b1 & 3)
		if h&0x40 == 0 {
			agent %= int32(c.NumAgents)
		}
		x := float64(int8(b2)) / 8
		if wide {
			x = float64(int8(b2)) / 10 * math.Pow(10, float64(int8(data[i+3]))*308/127)
		}
		switch b2 {
		case 0x80:
			x = math.NaN()
		case 0x7f:
			x = math.Inf(1)
		}
		c.Group = append(c.Group, g)
		c.Traj = append(c.Traj, traj)
		c.Agent = append(c.Agent, agent)
		c.Score = append(c.Score, x)
	}
	if h&0x80 != 0 && len(c.Score) > 0 {
		c.Score = c.Score[:len(c.Score)-1]
	}
	return c
}

func FuzzCompute(f *testing.F) {
	f.Add([]byte{2, 1, 0, 8, 0, 1, 8, 0, 4, 0, 0, 8, 8, 0, 9, 0})
	f.Add([]byte{0x40, 3, 1, 8, 0, 4, 8})
	f.Add([]byte{0x80, 3, 1, 8, 0, 4, 8})
	// Wide scores: 9.47e16, 1, −9.47e16 (10^(7·308/127) ≈ 9.47e16), where rloo cancels (row 1:
	// the fast path's advantage is 1.5, Reference's 1); ±1.16e160 and 0 (σ overflows); ±6.4e38
	// then 1, 0.1 (float32 advantages overflow); 1.5e308, 1e308, 2 (the sum overflows).
	f.Add([]byte{0x20, 1, 0, 10, 7, 0, 0, 10, 0, 0, 0, 246, 7})
	f.Add([]byte{0x20, 1, 0, 10, 66, 0, 0, 246, 66, 0, 0, 0, 0})
	f.Add([]byte{0x21, 1, 0, 10, 16, 0, 1, 246, 16, 3, 0, 10, 0, 2, 1, 1, 0})
	f.Add([]byte{0x20, 1, 0, 15, 127, 0, 0, 10, 127, 0, 0, 20, 0})
	specs := allSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cols := fuzzColumns(data)
		outs := make([]*Result, len(specs))
		for i := range outs {
			outs[i] = new(Result)
		}
		manyErr := ComputeMany(context.Background(), specs, cols, outs)
		var errs []string // of the specs that fail alone
		for i, spec := range specs {
			var one Result
			err := Compute(context.Background(), spec, cols, &one)
			ref, refErr := Reference(spec, cols)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("%s: Compute error %v, Reference error %v", spec.Name(), err, refErr)
			}
			if err != nil {
				if err.Error() != refErr.Error() {
					t.Fatalf("%s: Compute error %q, Reference error %q", spec.Name(), err, refErr)
				}
				errs = append(errs, err.Error())
				continue
			}
			if d := diffResult(one, ref, rlooSlack(spec, cols)); d != "" {
				t.Fatalf("%s: Compute vs Reference: %s", spec.Name(), d)
			}
			if manyErr == nil {
				if d := diffResult(*outs[i], one, nil); d != "" {
					t.Fatalf("%s: ComputeMany vs Compute: %s", spec.Name(), d)
				}
			}
		}
		// ComputeMany fails iff some spec fails alone, with one of their errors (the first
		// row's, whichever spec it is).
		if (manyErr == nil) != (len(errs) == 0) || (manyErr != nil && !slices.Contains(errs, manyErr.Error())) {
			t.Fatalf("ComputeMany error %v, the specs' own errors %q", manyErr, errs)
		}
		fd, err := Diagnose(cols)
		rd, refErr := DiagnoseReference(cols)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Diagnose error %v, reference error %v", err, refErr)
		}
		for k := range rd {
			if d := diffDiag(fd[k], rd[k], 1e-9); d != "" {
				t.Fatalf("agent %d: %s\n got %+v\nwant %+v", k, d, fd[k], rd[k])
			}
		}
	})
}
