// Package gpu decides where a learner runs and opens its GPU: NVML placement (package
// devices) picks the device, the CUDA driver (gpu/cuda) opens it, and gpu/engine trains on it.
//
// What the package promises:
//
//   - OpenLearner returns a GPU only when NVML reports a driver, devices.Place assigns the
//     model's learner to a GPU and CUDA opens that same device (matched by UUID); otherwise it
//     returns the reason, and the caller runs the CPU engine. It never calls into NVML or CUDA
//     after either failed to initialise.
//   - Builds without cgo have no NVML: then the learner goes to CUDA device 0 when the CUDA
//     driver loads, and to the CPU engine when it does not.
//   - DRMAS_LEARNER_ENGINE=cpu forces the CPU engine; =gpu makes a missing GPU an error;
//     unset or "auto" picks as above.
//   - Devices are opened once per process and shared by every learner placed on them.
package gpu

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/devices"
	"github.com/drmas-dev/drmas/gpu/cuda"
)

// EngineEnv is the environment variable that overrides the learner's engine choice.
const EngineEnv = "DRMAS_LEARNER_ENGINE"

var (
	mu     sync.Mutex
	opened = map[int]*cuda.Device{}
)

// Choice is where one learner runs.
type Choice struct {
	Device *cuda.Device // nil: CPU engine
	Where  string       // "gpu:<nvml index>" or "cpu"
	Reason string       // why the CPU engine, or the placement reason
}

// Line is the one line a learner prints about its engine, e.g.
// "learner m1: GPU engine on gpu:0 (NVIDIA H200, ...)" or "learner m1: CPU engine (...)".
func (c Choice) Line(model string) string {
	if c.Device == nil {
		return fmt.Sprintf("learner %s: CPU engine (%s)", model, c.Reason)
	}
	return fmt.Sprintf("learner %s: GPU engine on %s (%s; %s)", model, c.Where, c.Device.Name(), c.Reason)
}

// OpenLearner chooses the engine of model id's learner under cfg. An error is returned only
// when DRMAS_LEARNER_ENGINE=gpu and no GPU can be used, or on an invalid setting; every other
// failure to use a GPU is a CPU Choice with its reason.
func OpenLearner(cfg *configs.Config, id string) (Choice, error) {
	if err := CheckEngineEnv(); err != nil {
		return Choice{}, err
	}
	mode := engineMode()
	if mode == "cpu" {
		return Choice{Where: "cpu", Reason: EngineEnv + "=cpu"}, nil
	}
	c := choose(cfg, id)
	if c.Device == nil && mode == "gpu" {
		return c, fmt.Errorf("%s=gpu but the learner of %s cannot use a GPU: %s", EngineEnv, id, c.Reason)
	}
	return c, nil
}

func engineMode() string { return strings.ToLower(strings.TrimSpace(os.Getenv(EngineEnv))) }

// CheckEngineEnv reports a DRMAS_LEARNER_ENGINE value that OpenLearner would refuse, so that a
// command can refuse it up front rather than after the stages before learn have run.
func CheckEngineEnv() error {
	switch mode := engineMode(); mode {
	case "", "auto", "gpu", "cpu":
		return nil
	default:
		return fmt.Errorf("%s=%q: want auto, cpu or gpu", EngineEnv, mode)
	}
}

// Required reports whether DRMAS_LEARNER_ENGINE=gpu: a learner that cannot train on a GPU must
// fail rather than fall back to the CPU engine.
func Required() bool { return engineMode() == "gpu" }

func choose(cfg *configs.Config, id string) Choice {
	cpu := func(reason string) Choice { return Choice{Where: "cpu", Reason: reason} }
	devs, err := devices.Discover()
	var nd *devices.NoDriverError
	if errors.As(err, &nd) {
		if nd.Code != 0 {
			return cpu(nd.Error())
		}
		// NVML not compiled in (no cgo): CUDA alone decides, device 0.
		if err := cuda.Init(); err != nil {
			return cpu(err.Error())
		}
		d, err := open(0)
		if err != nil {
			return cpu(err.Error())
		}
		return Choice{Device: d, Where: "cuda:0", Reason: "no NVML in this build: CUDA device 0"}
	}
	if err != nil && len(devs) == 0 {
		return cpu(fmt.Sprintf("nvml: %v", err))
	}
	_, learners := devices.Plan(cfg)
	pl, err := devices.Place(devs, learners)
	if err != nil {
		return cpu(fmt.Sprintf("placement: %v", err))
	}
	var a *devices.Assignment
	for i := range pl.Assignments {
		if pl.Assignments[i].Job.Name == "learner/"+id {
			a = &pl.Assignments[i]
		}
	}
	if a == nil {
		return cpu("no learner job for model " + id)
	}
	if a.Device == devices.CPU {
		return cpu("placement: " + a.Reason)
	}
	var uuid string
	for _, d := range devs {
		if d.Index == a.Device {
			uuid = d.UUID
		}
	}
	if err := cuda.Init(); err != nil {
		return cpu(err.Error())
	}
	uuids, err := cuda.DeviceUUIDs()
	if err != nil {
		return cpu(err.Error())
	}
	ord := -1
	for i, u := range uuids {
		if strings.EqualFold(u, uuid) {
			ord = i
		}
	}
	if ord < 0 {
		return cpu(fmt.Sprintf("NVML device %d (%s) is not visible to CUDA (CUDA_VISIBLE_DEVICES?)", a.Device, uuid))
	}
	d, err := open(ord)
	if err != nil {
		return cpu(err.Error())
	}
	return Choice{Device: d, Where: a.Where(), Reason: a.Reason}
}

// open returns the process's Device for a CUDA ordinal, opening it once.
func open(ord int) (*cuda.Device, error) {
	mu.Lock()
	defer mu.Unlock()
	if d, ok := opened[ord]; ok {
		return d, nil
	}
	d, err := cuda.Open(ord)
	if err != nil {
		return nil, err
	}
	opened[ord] = d
	return d, nil
}
