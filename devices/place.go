package devices

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/model"
)

// Kind says what a placed job runs.
type Kind string

// Job kinds.
const (
	// Actor is one model's sampling backend during rollout and evaluation; agents sharing a
	// model share it.
	Actor Kind = "actor"
	// Learner is one model's PPO update (weights, gradients, AdamW moments, activations).
	Learner Kind = "learner"
)

// Job is something to place on a device.
type Job struct {
	Name   string // unique, e.g. "actor/m1"
	Kind   Kind
	Model  string
	Memory uint64 // bytes needed, e.g. from EstimateMemory
}

// CPU is the Device of an assignment that runs on the CPU engine.
const CPU = -1

// Assignment is where one job runs and why.
type Assignment struct {
	Job    Job
	Device int // a Device.Index, or CPU
	Reason string
}

// Where is "gpu:<index>" or "cpu".
func (a Assignment) Where() string {
	if a.Device == CPU {
		return "cpu"
	}
	return fmt.Sprintf("gpu:%d", a.Device)
}

// Placement is the result of Place: one assignment per job, in the order the jobs were
// given, and the memory left on each device afterwards.
type Placement struct {
	Assignments []Assignment
	Free        map[int]uint64
}

// Place assigns jobs that run at the same time (e.g. the actor backends of one rollout, or
// the learners of one learn stage) to devs by memory: first-fit decreasing over the jobs
// (largest first; ties by kind, learners first, then name) into the devices in index order,
// using each device's free memory as capacity. Jobs share a device when they fit together; a
// job that fits nowhere, or any job when there are no devices, goes to the CPU engine. The
// result depends only on the inputs. Errors: duplicate job names or device indexes.
func Place(devs []Device, jobs []Job) (Placement, error) {
	seenJob := map[string]bool{}
	for _, j := range jobs {
		if seenJob[j.Name] {
			return Placement{}, fmt.Errorf("place: duplicate job %q", j.Name)
		}
		seenJob[j.Name] = true
	}
	ds := slices.Clone(devs)
	slices.SortFunc(ds, func(a, b Device) int { return cmp.Compare(a.Index, b.Index) })
	free := make(map[int]uint64, len(ds))
	for i, d := range ds {
		if i > 0 && ds[i-1].Index == d.Index {
			return Placement{}, fmt.Errorf("place: duplicate device index %d", d.Index)
		}
		free[d.Index] = d.MemoryFree
	}

	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ja, jb := jobs[a], jobs[b]
		if c := cmp.Compare(jb.Memory, ja.Memory); c != 0 {
			return c
		}
		if ja.Kind != jb.Kind {
			if ja.Kind == Learner {
				return -1
			}
			if jb.Kind == Learner {
				return 1
			}
			return cmp.Compare(ja.Kind, jb.Kind)
		}
		return cmp.Compare(ja.Name, jb.Name)
	})

	out := Placement{Assignments: make([]Assignment, len(jobs)), Free: free}
	onDevice := map[int][]string{}
	for _, i := range order {
		j := jobs[i]
		a := Assignment{Job: j, Device: CPU}
		if len(ds) == 0 {
			a.Reason = "no GPU: CPU engine"
		} else {
			best := ds[0]
			for _, d := range ds {
				if free[d.Index] >= j.Memory {
					a.Device = d.Index
					break
				}
				if free[d.Index] > free[best.Index] {
					best = d
				}
			}
			if a.Device == CPU {
				a.Reason = fmt.Sprintf("needs %s; fits on no GPU (most free: %s on gpu:%d): CPU engine", Bytes(j.Memory), Bytes(free[best.Index]), best.Index)
			} else {
				before := free[a.Device]
				free[a.Device] -= j.Memory
				a.Reason = fmt.Sprintf("needs %s of %s free", Bytes(j.Memory), Bytes(before))
				if others := onDevice[a.Device]; len(others) > 0 {
					a.Reason += fmt.Sprintf("; shares gpu:%d with %s", a.Device, strings.Join(others, ", "))
				}
				onDevice[a.Device] = append(onDevice[a.Device], j.Name)
			}
		}
		out.Assignments[i] = a
	}
	return out, nil
}

// EstimateMemory is a rough upper bound of the device memory, in bytes, that a model needs,
// all float32 (4 bytes):
//
//   - an actor (learner false): weights (params × 4) plus the KV cache of batch sequences of
//     full context: 2 (K and V) × context × layers × dim × batch × 4;
//   - a learner: weights, gradients and the two AdamW moments (params × 4 × 4) plus the
//     activations kept for the backward pass of a micro-batch of batch sequences: per token
//     and layer (8 + 2·ff_mult)·dim values plus 2·heads·context attention weights, and the
//     logits and their gradient (2 × vocab per token).
func EstimateMemory(c model.Config, batch int, learner bool) uint64 {
	const f32 = 4
	b := uint64(max(batch, 1))
	params := uint64(max(c.NumParams(), 0))
	ctx, layers, dim := uint64(max(c.Context, 0)), uint64(max(c.Layers, 0)), uint64(max(c.Dim, 0))
	if !learner {
		return params*f32 + 2*ctx*layers*dim*b*f32
	}
	perTokenLayer := (8+2*uint64(max(c.FFMult, 0)))*dim + 2*uint64(max(c.Heads, 0))*ctx
	act := b * ctx * (layers*perTokenLayer + 2*uint64(max(c.Vocab, 0)))
	return params*f32*4 + act*f32
}

// Plan lists the jobs of cfg: one actor per model served in process (backend local; models
// served by an OpenAI-compatible server run wherever that server runs) and one learner per
// model drmas trains (every model with sizes). Actors hold the KV cache of one iteration's
// samples (tasks.per_iteration × rollout.group_size sequences); learners the activations of
// the largest micro-batch among the model's agents.
func Plan(cfg *configs.Config) (actors, learners []Job) {
	for _, id := range cfg.ModelNames() {
		m := cfg.Models[id]
		if m.External() {
			continue
		}
		mc := m.Engine()
		if !m.IsOpenAI() {
			batch := cfg.Tasks.PerIteration * cfg.Rollout.GroupSize
			actors = append(actors, Job{Name: "actor/" + id, Kind: Actor, Model: id, Memory: EstimateMemory(mc, batch, false)})
		}
		micro := cfg.Learn.MicroBatch
		for _, a := range cfg.AgentsOf(id) {
			micro = max(micro, cfg.OptimOf(a).MicroBatch)
		}
		learners = append(learners, Job{Name: "learner/" + id, Kind: Learner, Model: id, Memory: EstimateMemory(mc, micro, true)})
	}
	return actors, learners
}
