package learn

import gpuengine "github.com/drmas-dev/drmas/gpu/engine"

// EngineFor exposes engineFor to the external tests.
var EngineFor = engineFor

// SetTestDevice makes every learner use the GPU engine on f's device until the test ends.
func SetTestDevice(t interface{ Cleanup(func()) }, f func() gpuengine.Device) {
	testDevice = f
	t.Cleanup(func() { testDevice = nil })
}
