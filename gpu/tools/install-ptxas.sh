#!/usr/bin/env bash
# gpu/tools/install-ptxas.sh — installs NVIDIA's PTX assembler (ptxas) and disassembler (nvdisasm) from
# Debian's non-free nvidia-cuda-toolkit package into $DRMAS_TOOLS/bin (default
# ~/.cache/drmas-tools/bin), so that gpu/kernels' TestPTXAssembles can assemble kernels.ptx
# for real GPU architectures on a machine without a GPU or a CUDA installation.
#
# The package is pinned by version and sha256 and fetched straight from the Debian pool
# (no apt sources change, no root); only the two binaries are kept (~70 MB). Idempotent: a
# matching installed version is left alone. Exit status 0 when ptxas is installed.
set -euo pipefail
VERSION="11.8.89~11.8.0-5~deb12u1"
SHA256="d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457"
URL="${DRMAS_DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_${VERSION}_amd64.deb"
TOOLS="${DRMAS_TOOLS:-$HOME/.cache/drmas-tools}"

if [ -x "$TOOLS/bin/ptxas" ] && [ -x "$TOOLS/bin/nvdisasm" ] && [ "$(cat "$TOOLS/ptxas.version" 2>/dev/null)" = "$VERSION" ]; then
	exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
	echo "install-ptxas: only amd64 is pinned (this is $(uname -m))" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "install-ptxas: fetching nvidia-cuda-toolkit $VERSION (84 MB) from $URL"
curl -fsSL --retry 3 -o "$tmp/toolkit.deb" "$URL"
got=$(sha256sum "$tmp/toolkit.deb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
	echo "install-ptxas: sha256 mismatch: got $got, want $SHA256" >&2
	exit 1
fi
if command -v dpkg-deb >/dev/null; then
	dpkg-deb --fsys-tarfile "$tmp/toolkit.deb" >"$tmp/data.tar"
else # ar + tar: the deb's data member
	(cd "$tmp" && ar x toolkit.deb && xz -dc data.tar.xz >data.tar)
fi
tar -xf "$tmp/data.tar" -C "$tmp" ./usr/bin/ptxas ./usr/bin/nvdisasm
mkdir -p "$TOOLS/bin"
install -m 0755 "$tmp/usr/bin/ptxas" "$tmp/usr/bin/nvdisasm" "$TOOLS/bin/"
echo "$VERSION" >"$TOOLS/ptxas.version"
"$TOOLS/bin/ptxas" --version | tail -1
