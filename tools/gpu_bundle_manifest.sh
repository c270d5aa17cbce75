#!/usr/bin/env bash
# What a GPU bundle (make gpu-bundle, make gpu-bundle-mock) holds, written to its MANIFEST when it
# is built: the commit it was built from, its size, and for each program the shared libraries it
# still needs and the newest glibc symbol version it asks for (the GPU machine's glibc must be at
# least that). tools/gpu_check.sh prints it at the start of its log.
#   tools/gpu_bundle_manifest.sh build/gpu-bundle > build/gpu-bundle/MANIFEST
set -u
dir=${1:?usage: tools/gpu_bundle_manifest.sh BUNDLE_DIR}
echo "bundle: $dir"
echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version 2>/dev/null | head -n 1)"
echo "commit when this was written (a program is rebuilt only when its sources change): $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
echo "size: $(du -sk "$dir" | cut -f1) KiB"
for p in "$dir"/bin/*; do
    libs=$(ldd "$p" 2>/dev/null | awk '/=>/ { print $1 } !/=>/ && /^\t\// { print $1 }' | sed 's|.*/||' | sort | tr '\n' ' ')
    glibc=$(objdump -T "$p" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
    echo "program: ${p##*/} $(du -k "$p" | cut -f1) KiB, glibc >= ${glibc#GLIBC_}, needs: $libs"
done
