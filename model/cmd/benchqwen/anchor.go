package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/cpu"
)

// jemallocGlob is where Debian's libjemalloc2 (installed by .ci/install-oracles.sh) puts
// the library, for any architecture's multiarch folder.
const jemallocGlob = "/usr/lib/*-linux-gnu/libjemalloc.so.2"

// jemalloc is the installed library's path, or "".
func jemalloc() string {
	m, _ := filepath.Glob(jemallocGlob)
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// torchEnv is the environment PyTorch's side runs in, and a line that says how it was set,
// so that the anchor runs at its best on this machine rather than as a default left it:
//   - malloc "jemalloc" preloads jemalloc with its pages retained (when installed), so that
//     PyTorch reuses a step's memory as drmas's arena does; glibc returns every buffer over
//     32 MiB to the kernel and faults it in again the next step, which on some VMs costs a
//     third of PyTorch's CPU time. "system" keeps glibc.
//   - core "auto" sets OPENBLAS_CORETYPE=SkylakeX (OpenBLAS's AVX-512 kernels) on a CPU with
//     AVX-512, even over the environment's: Debian's OpenBLAS 0.3.21 does not know AMD Zen 5
//     and would run its AVX2 (Haswell) kernels there, and some machines set Haswell for
//     every process. "none" keeps the environment's or OpenBLAS's own choice; anything else
//     is passed as the core's name.
func torchEnv(malloc, core string) (env []string, desc string, err error) {
	env = os.Environ()
	var parts []string
	switch malloc {
	case "jemalloc":
		lib := jemalloc()
		if lib == "" {
			parts = append(parts, "glibc malloc (jemalloc is not installed: bash .ci/install-oracles.sh)")
			break
		}
		env = append(env, "LD_PRELOAD="+lib, "MALLOC_CONF=retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1")
		parts = append(parts, "jemalloc with its pages retained")
	case "system":
		parts = append(parts, "glibc malloc")
	default:
		return nil, "", fmt.Errorf("-torch-malloc %q: want jemalloc or system", malloc)
	}
	if strings.TrimSpace(core) == "" {
		return nil, "", fmt.Errorf("-openblas-core is empty: want auto, none or an OpenBLAS core name")
	}
	set, why := core, "" // the core to set ("" for none) and why auto chose it
	switch {
	case core == "none":
		set = ""
	case core == "auto" && hasAVX512():
		set, why = "SkylakeX", " (this CPU has AVX-512"
	case core == "auto":
		set, why = "", " (no AVX-512 here)"
	}
	inherited := os.Getenv("OPENBLAS_CORETYPE")
	switch {
	case set != "":
		env = append(env, "OPENBLAS_CORETYPE="+set)
		if why != "" && inherited != "" && inherited != set {
			why += "; the environment's " + inherited + " overridden, -openblas-core none keeps it"
		}
		if why != "" {
			why += ")"
		}
		parts = append(parts, "OPENBLAS_CORETYPE="+set+why)
	case inherited != "":
		parts = append(parts, "OPENBLAS_CORETYPE="+inherited+" (from the environment)")
	default:
		parts = append(parts, "OpenBLAS's own choice of kernels"+why)
	}
	return env, "PyTorch runs with " + strings.Join(parts, ", "), nil
}

// hasAVX512 reports the AVX-512 subsets OpenBLAS's SkylakeX kernels use.
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL
}
