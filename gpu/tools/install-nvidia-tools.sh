#!/usr/bin/env bash
# gpu/tools/install-nvidia-tools.sh — installs the NVIDIA parts the GPU tests can use on a
# machine without a GPU, from Debian's non-free archive, into $DRMAS_TOOLS (default
# ~/.cache/drmas-tools):
#
#   bin/ptxas, bin/nvdisasm      NVIDIA's PTX assembler and disassembler (nvidia-cuda-toolkit
#                                11.8): gpu/kernels' TestPTXAssembles assembles kernels.ptx
#                                for real GPU architectures with them.
#   nvidia-driver/libcuda.so.1,  the user-space driver libraries (libcuda1, libnvidia-ml1
#   nvidia-driver/libnvidia-ml.so.1  535): gpu/cuda and devices load them in child processes
#                                to check, without a GPU, that every driver symbol the binding
#                                uses exists and that a machine with the driver libraries but no
#                                GPU gets the clear one-line "no device" error.
#
# Every package is pinned by version and sha256 and fetched straight from the Debian pool (no
# apt sources change, no root); only the named files are kept (~100 MB). The driver libraries
# live in their own folder, never on the loader's default path. Idempotent: a complete
# install of the same pins is left alone. Exit status 0 when everything is installed.
set -euo pipefail
MIRROR="${DRMAS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DRMAS_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
TOOLS="${DRMAS_TOOLS:-$HOME/.cache/drmas-tools}"
# Each package: candidate "url sha256" pairs, tried in order (a point release may move a
# version out of the pool; the security archive keeps the newest).
TOOLKIT=("$MIRROR/pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_11.8.89~11.8.0-5~deb12u1_amd64.deb d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457")
LIBCUDA=("$MIRROR/pool/non-free/n/nvidia-graphics-drivers/libcuda1_535.261.03-1_amd64.deb de1e9ca34164a5983b3f752e6699cf1ad924790f1a843b7d582bab6f99206e1e"
	"$SECURITY/pool/updates/non-free/n/nvidia-graphics-drivers/libcuda1_535.309.01-0+deb12u1_amd64.deb 36b96d4b10d3a51573f56cae5a4ac9bcf206c1f2613bba7063793ab3da47305f")
LIBNVML=("$MIRROR/pool/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_535.261.03-1_amd64.deb c729da6ab729309dc3f481fe4d38f04ea03b0793154b0962b60117d2f37d082e"
	"$SECURITY/pool/updates/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_535.309.01-0+deb12u1_amd64.deb 51d55d68bcba1c568f2fb071ef0479b559f78a7ea8c7f286e824f11deedd7ed5")
PINS="$(printf '%s\n' "${TOOLKIT[@]}" "${LIBCUDA[@]}" "${LIBNVML[@]}" | sha256sum | cut -c1-16)"

if [ -x "$TOOLS/bin/ptxas" ] && [ -x "$TOOLS/bin/nvdisasm" ] && [ -e "$TOOLS/nvidia-driver/libcuda.so.1" ] &&
	[ -e "$TOOLS/nvidia-driver/libnvidia-ml.so.1" ] && [ "$(cat "$TOOLS/nvidia-tools.version" 2>/dev/null)" = "$PINS" ]; then
	exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
	echo "install-nvidia-tools: only amd64 is pinned (this is $(uname -m))" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fetch NAME CANDIDATE...: downloads the first candidate whose sha256 matches to $tmp/NAME.deb
# and unpacks its files into $tmp/NAME/.
fetch() {
	local name=$1 c url sum got
	shift
	for c in "$@"; do
		url=${c% *} sum=${c##* }
		echo "install-nvidia-tools: fetching $(basename "$url")"
		if ! curl -fsSL --retry 3 -o "$tmp/$name.deb" "$url"; then
			echo "install-nvidia-tools: $url: not available" >&2
			continue
		fi
		got=$(sha256sum "$tmp/$name.deb" | cut -d' ' -f1)
		if [ "$got" != "$sum" ]; then
			echo "install-nvidia-tools: $url: sha256 $got, want $sum" >&2
			continue
		fi
		mkdir -p "$tmp/$name"
		dpkg-deb -x "$tmp/$name.deb" "$tmp/$name"
		rm -f "$tmp/$name.deb"
		return 0
	done
	echo "install-nvidia-tools: no candidate of $name could be fetched" >&2
	return 1
}

fetch toolkit "${TOOLKIT[@]}"
fetch libcuda "${LIBCUDA[@]}"
fetch libnvml "${LIBNVML[@]}"
mkdir -p "$TOOLS/bin" "$TOOLS/nvidia-driver"
install -m 0755 "$tmp/toolkit/usr/bin/ptxas" "$tmp/toolkit/usr/bin/nvdisasm" "$TOOLS/bin/"
lib=$tmp/libcuda/usr/lib/x86_64-linux-gnu/nvidia/current
install -m 0644 "$(readlink -f "$lib/libcuda.so.1")" "$TOOLS/nvidia-driver/libcuda.so.1"
lib=$tmp/libnvml/usr/lib/x86_64-linux-gnu/nvidia/current
install -m 0644 "$(readlink -f "$lib/libnvidia-ml.so.1")" "$TOOLS/nvidia-driver/libnvidia-ml.so.1"
echo "$PINS" >"$TOOLS/nvidia-tools.version"
"$TOOLS/bin/ptxas" --version | tail -1
ls "$TOOLS/nvidia-driver"
