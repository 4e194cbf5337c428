package kernels

import (
	"context"
	"math"
	"testing"
)

// fuzzColumns decodes bytes into small Columns. data[0] is a header: NumAgents = 1 + h%4;
// bit 6 keeps raw agent codes (0..3, possibly ≥ NumAgents); bit 7 drops the last score (length
// mismatch). Each further 3 bytes (b0, b1, b2) are a row: b0&1 starts a new group with code
// b0>>1 (the first row always starts one; a code seen before makes the groups non-contiguous);
// b1>>2 is the trajectory code (63 means −1); b1&3 the agent; b2 the score int8(b2)/8, except
// 0x80 = NaN and 0x7f = +Inf.
func fuzzColumns(data []byte) *Columns {
	if len(data) == 0 {
		return &Columns{NumAgents: 1}
	}
	h := data[0]
	data = data[1:]
	c := &Columns{NumAgents: 1 + int(h%4)}
	g := int32(0)
	for i := 0; i+3 <= len(data) && i < 3*256; i += 3 {
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
	specs := allSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cols := fuzzColumns(data)
		outs := make([]*Result, len(specs))
		for i := range outs {
			outs[i] = new(Result)
		}
		manyErr := ComputeMany(context.Background(), specs, cols, outs)
		for i, spec := range specs {
			var one Result
			err := Compute(context.Background(), spec, cols, &one)
			ref, refErr := Reference(spec, cols)
			if (err == nil) != (refErr == nil) || (manyErr == nil) != (err == nil) {
				t.Fatalf("%s: Compute error %v, ComputeMany error %v, Reference error %v", spec.Name(), err, manyErr, refErr)
			}
			if err != nil {
				if err.Error() != refErr.Error() {
					t.Fatalf("%s: Compute error %q, Reference error %q", spec.Name(), err, refErr)
				}
				continue
			}
			if d := diffResult(one, ref); d != "" {
				t.Fatalf("%s: Compute vs Reference: %s", spec.Name(), d)
			}
			if d := diffResult(*outs[i], one); d != "" {
				t.Fatalf("%s: ComputeMany vs Compute: %s", spec.Name(), d)
			}
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
