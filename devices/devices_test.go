package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/model"
)

const GiB = 1 << 30

func gpu(i int, freeGiB uint64) Device {
	return Device{Index: i, Name: fmt.Sprintf("Fake %d", i), UUID: fmt.Sprintf("GPU-%d", i), MemoryTotal: 80 * GiB, MemoryFree: freeGiB * GiB, Utilization: -1, MemoryUtilization: -1}
}

func job(name string, kind Kind, gib uint64) Job {
	return Job{Name: name, Kind: kind, Model: name, Memory: gib * GiB}
}

func where(p Placement) map[string]int {
	out := map[string]int{}
	for _, a := range p.Assignments {
		out[a.Job.Name] = a.Device
	}
	return out
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		devs []Device
		jobs []Job
		want map[string]int
		free map[int]uint64 // GiB left
		why  map[string]string
	}{
		{
			name: "backends share a device when they fit",
			devs: []Device{gpu(0, 40), gpu(1, 40)},
			jobs: []Job{job("a", Actor, 10), job("b", Actor, 20), job("c", Actor, 5)},
			want: map[string]int{"a": 0, "b": 0, "c": 0},
			free: map[int]uint64{0: 5, 1: 40},
			why:  map[string]string{"c": "shares gpu:0 with b, a"},
		},
		{
			name: "spill to the second device",
			devs: []Device{gpu(0, 24), gpu(1, 40)},
			jobs: []Job{job("a", Actor, 20), job("b", Actor, 30), job("c", Actor, 10)},
			// b (30) does not fit gpu:0 (24), a (20) does; c (10) no longer fits gpu:0 (4 left).
			want: map[string]int{"b": 1, "a": 0, "c": 1},
			free: map[int]uint64{0: 4, 1: 0},
			why:  map[string]string{"c": "shares gpu:1 with b"},
		},
		{
			name: "cpu when nothing fits",
			devs: []Device{gpu(0, 8), gpu(1, 16)},
			jobs: []Job{job("big", Learner, 64), job("small", Actor, 4)},
			want: map[string]int{"big": CPU, "small": 0},
			why:  map[string]string{"big": "most free: 16.0 GiB on gpu:1"},
		},
		{
			name: "no devices",
			devs: nil,
			jobs: []Job{job("a", Actor, 1), job("b", Learner, 0)},
			want: map[string]int{"a": CPU, "b": CPU},
			why:  map[string]string{"a": "no GPU"},
		},
		{
			name: "exact fit",
			devs: []Device{gpu(3, 10)},
			jobs: []Job{job("a", Actor, 10)},
			want: map[string]int{"a": 3},
			free: map[int]uint64{3: 0},
		},
		{
			name: "ties: learners first, then by name",
			devs: []Device{gpu(0, 10), gpu(1, 10)},
			jobs: []Job{job("z", Actor, 10), job("y", Learner, 10), job("x", Actor, 10)},
			want: map[string]int{"y": 0, "x": 1, "z": CPU},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Place(tc.devs, tc.jobs)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Assignments) != len(tc.jobs) {
				t.Fatalf("%d assignments", len(p.Assignments))
			}
			for i, a := range p.Assignments {
				if a.Job != tc.jobs[i] {
					t.Fatalf("assignment %d is for %v, want input order", i, a.Job)
				}
				if a.Reason == "" {
					t.Errorf("%s: no reason", a.Job.Name)
				}
			}
			got := where(p)
			for n, d := range tc.want {
				if got[n] != d {
					t.Errorf("%s on %d, want %d (%v)", n, got[n], d, p.Assignments)
				}
			}
			for d, g := range tc.free {
				if p.Free[d] != g*GiB {
					t.Errorf("gpu:%d free %s, want %d GiB", d, Bytes(p.Free[d]), g)
				}
			}
			for _, a := range p.Assignments {
				if w, ok := tc.why[a.Job.Name]; ok && !strings.Contains(a.Reason, w) {
					t.Errorf("%s: reason %q, want it to contain %q", a.Job.Name, a.Reason, w)
				}
			}
		})
	}
}

// The placement depends on the jobs and devices, not on the order they are listed in.
func TestPlaceDeterministic(t *testing.T) {
	devs := []Device{gpu(0, 20), gpu(1, 20), gpu(2, 7)}
	var jobs []Job
	for i := range 12 {
		jobs = append(jobs, job(fmt.Sprintf("j%02d", i), []Kind{Actor, Learner}[i%2], uint64(1+i%5)))
	}
	first, err := Place(devs, jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := where(first)
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		js, ds := append([]Job(nil), jobs...), append([]Device(nil), devs...)
		r.Shuffle(len(js), func(i, j int) { js[i], js[j] = js[j], js[i] })
		r.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		p, err := Place(ds, js)
		if err != nil {
			t.Fatal(err)
		}
		got := where(p)
		for n, d := range want {
			if got[n] != d {
				t.Fatalf("%s moved from %d to %d after shuffling", n, d, got[n])
			}
		}
		for d, f := range first.Free {
			if p.Free[d] != f {
				t.Fatalf("gpu:%d free differs after shuffling", d)
			}
		}
	}
	// Nothing is over-committed.
	used := map[int]uint64{}
	for _, a := range first.Assignments {
		if a.Device != CPU {
			used[a.Device] += a.Job.Memory
		}
	}
	for _, d := range devs {
		if used[d.Index] > d.MemoryFree {
			t.Fatalf("gpu:%d over-committed", d.Index)
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	if _, err := Place(nil, []Job{job("a", Actor, 1), job("a", Learner, 1)}); err == nil {
		t.Error("duplicate jobs accepted")
	}
	if _, err := Place([]Device{gpu(0, 1), gpu(0, 2)}, nil); err == nil {
		t.Error("duplicate devices accepted")
	}
}

func TestEstimateMemory(t *testing.T) {
	c := model.DefaultConfig()
	params := uint64(c.NumParams())
	kvPerSeq := uint64(2 * c.Context * c.Layers * c.Dim * 4)
	if got, want := EstimateMemory(c, 8, false), params*4+8*kvPerSeq; got != want {
		t.Errorf("actor: %d, want %d", got, want)
	}
	if got := EstimateMemory(c, 0, false); got != params*4+kvPerSeq {
		t.Errorf("batch 0 counts as 1: %d", got)
	}
	l1, l2 := EstimateMemory(c, 1, true), EstimateMemory(c, 2, true)
	if l1 <= params*16 || l2 <= l1 || l1 <= EstimateMemory(c, 1, false) {
		t.Errorf("learner estimates %d %d", l1, l2)
	}
	// Doubling the batch doubles the activations only.
	if (l2 - params*16) != 2*(l1-params*16) {
		t.Errorf("activations not linear in batch: %d %d", l1, l2)
	}
}

func TestPlan(t *testing.T) {
	cfg := configs.Default()
	cfg.Models["ext"] = configs.Model{Backend: configs.BackendOpenAI, OpenAI: configs.OpenAI{Endpoint: "http://x"}}
	served := cfg.Models["m1"]
	served.Backend = configs.BackendOpenAI
	cfg.Models["m2"] = served
	actors, learners := Plan(cfg)
	if len(actors) != 1 || actors[0].Name != "actor/m1" || actors[0].Kind != Actor || actors[0].Memory == 0 {
		t.Errorf("actors %+v (m2 is served over HTTP, ext is external)", actors)
	}
	if len(learners) != 2 || learners[0].Name != "learner/m1" || learners[1].Name != "learner/m2" || learners[0].Memory <= actors[0].Memory {
		t.Errorf("learners %+v", learners)
	}
	want := EstimateMemory(cfg.Models["m1"].Engine(), cfg.Tasks.PerIteration*cfg.Rollout.GroupSize, false)
	if actors[0].Memory != want {
		t.Errorf("actor memory %d, want %d", actors[0].Memory, want)
	}
}

// This machine (like CI) has no NVIDIA driver: Discover must say so without crashing, every
// time, and Telemetry must return nothing. On a GPU machine it lists the devices instead.
func TestDiscoverNoDriver(t *testing.T) {
	for range 3 {
		devs, err := Discover()
		if err == nil {
			t.Logf("NVML works here: %d devices %+v", len(devs), devs)
			s, err := Telemetry(context.Background())
			if err != nil || len(s) != len(devs) {
				t.Fatalf("telemetry %v, %v", s, err)
			}
			return
		}
		if !errors.Is(err, ErrNoDriver) || devs != nil {
			t.Fatalf("Discover = %v, %v; want the no-driver result", devs, err)
		}
		var nd *NoDriverError
		if !errors.As(err, &nd) {
			t.Fatalf("%T is not a *NoDriverError", err)
		}
		if nd.Code == 12 { // ERROR_LIBRARY_NOT_FOUND
			const want = "CPU mode: no NVIDIA driver (libnvidia-ml.so.1 not found); stages run on the CPU engine"
			if got := CPUModeLine(err); got != want {
				t.Fatalf("CPUModeLine = %q, want %q", got, want)
			}
		}
		s, err := Telemetry(context.Background())
		if s != nil || err != nil {
			t.Fatalf("Telemetry in CPU mode = %v, %v; want nil, nil", s, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Telemetry(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Telemetry with a canceled context: %v", err)
	}
}

func TestReport(t *testing.T) {
	devs := []Device{gpu(0, 40), {Index: 1, Name: "Fake 1", UUID: "GPU-1", MemoryTotal: 80 * GiB, MemoryFree: 2 * GiB, Utilization: 93, MemoryUtilization: 40}}
	var buf bytes.Buffer
	if err := WriteDevices(&buf, devs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU-0", "40.0 GiB / 80.0 GiB", "93%", "Fake 1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("devices table lacks %q:\n%s", want, buf.String())
		}
	}
	p, _ := Place(devs, []Job{job("actor/m1", Actor, 50)})
	buf.Reset()
	if err := WritePlacements(&buf, StagePlacement{Stages: "rollout", Placement: p}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "actor/m1") || !strings.Contains(buf.String(), "cpu") {
		t.Errorf("placement table:\n%s", buf.String())
	}
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 80 * GiB: "80.0 GiB", 3 << 40: "3.0 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
