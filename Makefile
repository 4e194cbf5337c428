# drmas — common tasks. `make test` is the test command CI runs (.ci/run).
GO       ?= go
# bash with pipefail: `go test -json … | testreport` fails when go test fails, even if the
# report were to miss it.
SHELL    := /bin/bash
.SHELLFLAGS := -o pipefail -c
PKGS     := ./...
RACE_PKGS := ./storage/... ./shards/... ./commit/... ./configs/... ./checkpoints/...
BIN      := bin/drmas

.PHONY: build docs test test-race fuzz bench bench-upload bench-normalize bench-engine bench-qwen bench-llamacpp bench-summary bench-gpu gpu-check lint demo clean

build:
	$(GO) build -o $(BIN) ./cmd/drmas

## docs: rewrites the generated reference pages, docs/cli.md (every command's --help) and
## docs/configuration.md (every config key), from the binary and the config sources. Run it after
## changing a flag, a command or a config key; TestReferenceDocsCurrent fails until you do.
docs:
	$(GO) run ./cmd/drmas docs

## test: short fuzz runs of every fuzz target, the race detector on the storage, shard, commit,
## config and checkpoint packages, the packages with internal invariant checks built with
## `-tags invariants` (package internal/invariants), then the whole suite (storage acceptance
## against a real MinIO and the local folder, DuckDB shard checks, estimator goldens, engine
## gradient checks, stage, pipeline and reliability tests), summarised by internal/testreport.
INVARIANT_PKGS := ./estimators ./stages/... ./pipeline ./ablate
## The optimizer's and the estimators' tests again with GOAMD64=v3 (where the CPU has it), whose
## compiler fuses float multiply-adds unless the code forbids it: the AdamW update must stay
## bit-identical to the GPU kernel's on such hosts too, and normalize's statistics to a
## GOAMD64=v1 build's (same rollout, same advantage and diagnostics bytes).
V3_CPU := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo && grep -qw movbe /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && echo yes)
test:
	$(MAKE) fuzz FUZZTIME=5s
	$(GO) test -count=1 -race -timeout 10m $(RACE_PKGS)
	$(GO) test -count=1 -tags invariants -timeout 10m $(INVARIANT_PKGS)
	$(if $(V3_CPU),GOAMD64=v3 $(GO) test -count=1 -run 'AdamW|DeviceOptimizer|AdamStep|StdNotFused' ./model ./gpu/kernels ./gpu/engine ./estimators,@echo "no GOAMD64=v3 CPU: the fused-multiply-add check of the optimizer is skipped")
	$(GO) test -count=1 -timeout 20m -json $(PKGS) | $(GO) run ./internal/testreport

test-race:
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

## fuzz: each fuzz target for FUZZTIME (default 5s); the longer run is e.g. `make fuzz FUZZTIME=10m`.
## A failure prints the fuzzer's output and is retried once: an input that made a target fail
## is saved under testdata/fuzz/ and replayed by the retry, so real bugs still fail the run,
## while the fuzzing engine's own hiccups on a loaded 2-core machine do not. A bare "context
## deadline exceeded" with no input written is Go's coordinator racing its own -fuzztime
## deadline (golang/go#75804, fixed in Go 1.27): that is run again, up to three times.
FUZZTIME ?= 5s
FUZZ_ONE = $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10x $$pkg
fuzz:
	@set -e; log=$$(mktemp); for spec in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | awk '/^Fuzz/ {names[n++]=$$1} /^ok/ {for (i = 0; i < n; i++) print $$2":"names[i]; n = 0}' ); do \
	  pkg=$${spec%%:*}; name=$${spec##*:}; \
	  echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
	  for try in 1 2 3; do \
	    if $(FUZZ_ONE) >$$log 2>&1; then break; fi; \
	    cat $$log; \
	    if [ $$try = 3 ] || ! grep -q '^    context deadline exceeded' $$log || grep -q 'Failing input written' $$log; then \
	      echo "fuzz $$pkg $$name failed; retrying once"; $(FUZZ_ONE); break; \
	    fi; \
	    echo "fuzz $$pkg $$name: Go's fuzzing coordinator stopped at its own deadline (golang/go#75804), no input failed; running it again"; \
	  done; \
	done; rm -f $$log

## bench: every Go benchmark once (short); the comparisons below print ratios against anchors.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)
	$(MAKE) bench-upload

## bench-upload: shard upload to a local MinIO through drmas's Bucket vs raw minio-go PutObject,
## alternating in one run; prints the median MB/s of each and the ratio (target ≥ 0.90).
bench-upload:
	$(GO) test -run '^$$' -bench UploadShard -benchtime 4x -count 5 ./storage/s3store | tee /tmp/drmas-bench-upload.txt
	@awk '/UploadShard\/drmas/ {for(i=1;i<=NF;i++) if($$(i+1)=="MB/s") d[nd++]=$$i} \
	      /UploadShard\/raw/   {for(i=1;i<=NF;i++) if($$(i+1)=="MB/s") r[nr++]=$$i} \
	      function med(a,n,  i,j,t){for(i=0;i<n;i++)for(j=i+1;j<n;j++)if(a[j]<a[i]){t=a[i];a[i]=a[j];a[j]=t} return n%2?a[int(n/2)]:(a[n/2-1]+a[n/2])/2} \
	      END {if(nd&&nr){dm=med(d,nd);rm=med(r,nr);printf "upload: drmas %.1f MB/s, raw minio-go %.1f MB/s, ratio %.3f (target >= 0.90)\n",dm,rm,dm/rm} else {print "upload: no benchmark output (is the MinIO binary installed?)"; exit 1}}' /tmp/drmas-bench-upload.txt

bench-normalize:
	$(GO) run ./bench/normalize

## bench-engine: this machine's FMA peak and the GEMM at every Qwen2.5-0.5B training shape as a
## share of it (both kernels; ~1.5 GB, about a minute), training tokens/s, the training step's
## GFLOP/s vs the raw GEMM's (target ≥ 50%), decode tokens/s with and without the KV cache.
bench-engine:
	$(GO) run ./model/cmd/benchengine

## bench-qwen: the CPU engine on the Qwen2.5-0.5B shape (random weights, 2 threads) beside PyTorch
## on the same weights: forward+backward and batch-8 decode tokens/s with ratios, peak RSS of a
## full AdamW step. Needs the memory of that step free (docs/models.md gives the peak RSS); Debian
## python3-torch + OpenBLAS.
bench-qwen:
	nice -n 19 $(GO) run ./model/cmd/benchqwen $(BENCHQWEN_ARGS)

## bench-summary: every benchmark behind the engine's performance targets, one after the other
## (bench-qwen, bench-llamacpp, the GEMMs against the FMA peak, step memory, the group rollout,
## the sampler), then their table in Markdown with each ratio and target (docs/performance.md,
## "At a glance"); ~15 minutes, ~10 GB. BENCHSUMMARY_ARGS=-tiny checks the pipeline in seconds.
bench-summary:
	$(GO) run ./bench/summary $(BENCHSUMMARY_ARGS)

## bench-llamacpp: drmas's KV-cache greedy decode beside llama.cpp (node-llama-cpp's prebuilt build,
## installed by .ci/install-oracles.sh) on the same random weights written as GGUF, F32 and BF16,
## batch 1 and 8, Qwen2.5-0.5B shape, 2 threads each; prints tokens/s, ratios, greedy agreement.
bench-llamacpp:
	$(GO) run ./bench/llamacpp $(BENCHLLAMACPP_ARGS)

## bench-gpu: one PPO learner step on the GPU engine vs the CPU engine at d=512, 8 layers, B=64,
## T=256 (the anchor: the CPU engine), then a per-kernel profile; prints the speed-up.
## Without an NVIDIA driver it times the CPU engine only and says why.
bench-gpu:
	$(GO) run ./bench/learnstep $(BENCHGPU_ARGS)

## gpu-check: build the GPU checks of the learner (equivalence tests, learn stage on the GPU, the
## learner-step benchmark GPU vs CPU at d=512, 8 layers, B=64, T=256) into .gpucheck/ for a machine
## with an NVIDIA driver and no Go toolchain; there: `bash gpu/devicecheck.sh run`.
gpu-check:
	bash gpu/devicecheck.sh build

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)

## demo: the main job on the embedded default (local folder ./drmas-data, built-in policy).
demo: build
	./$(BIN) run

## clean: removes the built binary. Runs and checkpoints in ./drmas-data are data, not build
## output: delete them by hand (rm -rf drmas-data) when you mean to.
clean:
	rm -rf bin
