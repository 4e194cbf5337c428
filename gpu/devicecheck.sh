#!/usr/bin/env bash
# gpu/devicecheck.sh — the GPU learner's checks as one prepared script.
#
# The GPU machine has no Go toolchain and no network, so the checks are compiled here and the
# binaries travel in the ignored folder .gpucheck/ (gzipped):
#
#   gpu/devicecheck.sh build          # here: test binaries + benchmark into .gpucheck/
#   gpu/devicecheck.sh run            # on the GPU machine (device tool: carry [".gpucheck"])
#
# `run` prints everything and writes $OUT/devicecheck.log (and $OUT/bench.txt). Steps:
#   1. nvidia-smi and ptxas on gpu/kernels/kernels.ptx (syntax/resources; ptxas is optional)
#   2. gpu/cuda tests (init guard, UUID format)
#   3. gpu/engine GPU tests: GPU vs CPU equivalence (3 shapes; the head also in chunks),
#      GPU vs interpreter, 128-tile GEMMs = 64-tile GEMMs bit for bit,
#      bit-for-bit determinism, the device optimizer (BackwardInto, norms,
#      clipping, AdamW = the CPU's AdamW bit for bit, Sync)
#   4. gpu tests (NVML placement -> CUDA device -> "GPU engine on gpu:0")
#   5. stages/learn: the learn stage end to end on the GPU engine, with
#      DRMAS_LEARNER_ENGINE=gpu so a silent CPU fallback fails the step
#   6. learnstep: learner step GPU vs CPU, d=512, 8 layers, B=64, T=256
#      (the GPU with its device optimizer, then with the host optimizer),
#      then one profiled GPU step: time and GFLOP/s per kernel; then the
#      GPU alone with micro-batches of 8 (8 gradient copies a step on the
#      host-optimizer path)
#   7. only with SANITIZE=1: compute-sanitizer memcheck on a GPU test
# BENCH_ARGS passes flags to learnstep (e.g. BENCH_ARGS="-cpu-steps 0" on a rerun).
# Each step has its own timeout, cut to what is left of BUDGET seconds for the whole run
# (default 500, inside the device machine's 540 s; the steps' own timeouts add up to more),
# so that the summary and $OUT are written before the machine's limit; a step with less than
# 20 s left is skipped and counts as failed. A step that times out gets SIGQUIT first, so a
# hung Go binary prints its goroutines. A failing step does not stop the later ones. Exit
# status is non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.gpucheck

build() {
	set -e
	ex=$(git rev-parse --git-path info/exclude)
	grep -qx '/.gpucheck/' "$ex" 2>/dev/null || echo '/.gpucheck/' >>"$ex"
	rm -rf "$BIN" && mkdir -p "$BIN"
	bash gpu/tools/install-nvidia-tools.sh # kernels.ptx is up to date and assembles with ptxas:
	CI=true DRMAS_NVIDIA_TOOLS=1 go test -count=1 -run 'PTX' ./gpu/kernels
	for p in engine:./gpu/engine cuda:./gpu/cuda gpu:./gpu learn:./stages/learn; do
		go test -c -ldflags='-s -w' -o "$BIN/${p%%:*}.test" "${p#*:}"
	done
	go build -ldflags='-s -w' -o "$BIN/learnstep" ./bench/learnstep
	gzip -9 "$BIN"/*
	echo "$(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')" >"$BIN/commit"
	du -sh "$BIN"
}

run() {
	OUT=${OUT:-/tmp/devicecheck-out}
	mkdir -p "$OUT"
	exec > >(tee "$OUT/devicecheck.log") 2>&1
	[ -d "$BIN" ] || { echo "no $BIN: run 'gpu/devicecheck.sh build' first and carry .gpucheck"; exit 2; }
	T=/tmp/gpucheck && rm -rf $T && mkdir -p $T
	for f in "$BIN"/*.gz; do b=$(basename "$f" .gz); gunzip -c "$f" >"$T/$b" && chmod +x "$T/$b"; done
	fails=0
	budget=${BUDGET:-500}
	step() { # name timeout dir cmd...
		local name=$1 to=$2 dir=$3; shift 3
		echo; echo "=== $name ($(date -u +%T))"
		local left=$((budget - SECONDS - 15))
		if [ $left -lt 20 ]; then
			echo "=== $name: skipped, ${left}s left of the ${budget}s budget"
			fails=$((fails + 1))
			return
		fi
		[ "$to" -le $left ] || to=$left
		local s=$SECONDS
		(cd "$dir" && timeout -s QUIT -k 10 "$to" "$@"); local rc=$?
		echo "=== $name: rc=$rc in $((SECONDS - s))s"
		[ $rc -eq 0 ] || fails=$((fails + 1))
	}
	echo "devicecheck: commit $(cat $BIN/commit 2>/dev/null), $(nproc) cores"
	nvidia-smi -L || true
	PTXAS=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1 || true)
	if [ -n "$PTXAS" ]; then
		step "ptxas sm_90" 120 . "$PTXAS" -arch=sm_90 -v gpu/kernels/kernels.ptx -o /tmp/kernels.cubin
	else
		echo "ptxas not found: the driver JIT checks the PTX in step 3"
	fi
	step "gpu/cuda tests" 60 gpu/cuda $T/cuda.test -test.v -test.run 'TestInitOnce|TestFormatUUID'
	step "gpu/engine GPU tests" 240 gpu/engine $T/engine.test -test.v -test.run 'GPU'
	step "gpu tests (placement)" 60 gpu $T/gpu.test -test.v
	step "stages/learn on the GPU" 180 stages/learn env DRMAS_LEARNER_ENGINE=gpu $T/learn.test -test.v -test.run 'TestLearnStagePublishesAndIsIdempotent|TestLearnStageOnGPUEngine|TestEngineChoice|TestFirstUpdateRatioIsExactlyOne'
	step "benchmark d=512 L=8 B=64 T=256" 330 . bash -c "$T/learnstep ${BENCH_ARGS:-} | tee $OUT/bench.txt"
	step "benchmark, micro-batches of 8 (device vs host optimizer)" 120 . bash -c "$T/learnstep -micro-batch 8 -gpu-steps 3 -host-optimizer-steps 2 -cpu-steps 0 -profile=false | tee $OUT/bench-micro8.txt"
	if [ "${SANITIZE:-0}" = 1 ]; then # opt-in: compute-sanitizer works on Firecracker machines only
		CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
		[ -n "$CS" ] && step "compute-sanitizer memcheck" 180 gpu/engine "$CS" --tool memcheck --error-exitcode 3 $T/engine.test -test.run 'TestGPUDeterministic'
	fi
	echo
	grep '^RESULT' "$OUT/bench.txt" 2>/dev/null || true
	echo "devicecheck: $fails step(s) failed"
	[ $fails -eq 0 ]
}

case "${1:-}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
