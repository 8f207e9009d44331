#!/usr/bin/env bash
# Builds moetrain for a GPU host here and packs what `tools/gpu-check.sh --prebuilt DIR` runs
# there, so that none of the host's short GPU time goes to compiling (docs/BENCHMARKS.md, "GPU
# figures"). The host has the NVIDIA driver, CUDA 13 (cudart, cuBLAS) and Python with torch,
# but none of our Debian libraries.
#
#   tools/gpu-bundle.sh [OUT_DIR]          # default OUT_DIR: gpu-bundle
#
# 1. configures and builds build-gpu-bundle/ (Release, -Werror, CUDA for sm_90 only, no
#    OpenCL or MPI modules): the CLI, libmoetrain, the CUDA module and the doctest binary;
# 2. stages OUT_DIR/moetrain-gpu-bundle/: bin/ (those, stripped), lib/ (every shared library
#    they load that is not part of the host's base system: oneDNN, ICU, sentencepiece,
#    protobuf-lite, libgomp..., found with ldd), bench/ (the PyTorch peers), env.sh and
#    BUNDLE_INFO (commit, the source and build paths baked into the binaries);
# 3. packs it as OUT_DIR/moetrain-gpu-bundle.tar.xz and checks it: every library of every
#    binary resolves from the bundle or from the base-system list, and it is under SIZE_MB.
# Environment: BUILD (build dir, default build-gpu-bundle), CUDA_ARCH (default 90),
# SKIP_BUILD=1 (pack an existing build as it is), SIZE_MB (default 50), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-gpu-bundle}
BUILD=${BUILD:-build-gpu-bundle}
CUDA_ARCH=${CUDA_ARCH:-90}
SIZE_MB=${SIZE_MB:-50}
JOBS=${JOBS:-2}
NAME=moetrain-gpu-bundle
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

# Libraries the GPU host provides itself: glibc, the CUDA driver and toolkit (CUDA 13).
# libstdc++ / libgcc_s are carried all the same (the host's may be older than gcc 12's).
base_system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libnvJitLink|libnccl)\.so'

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    launcher=()
    if command -v ccache >/dev/null; then
        launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    fi
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOETRAIN_WERROR=ON \
        -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DMOETRAIN_WITH_OPENCL=OFF \
        -DMOETRAIN_WITH_MPI=OFF -DMOETRAIN_BUILD_TESTS=ON "${launcher[@]}"
    cmake --build "$BUILD" -j"$JOBS" --target moetrain_cli moetrain_backend_cuda moetrain_tests
fi
# An sm_90 bundle carries the CUTLASS grouped GEMM kernels (the GPU check tests and times them).
if [[ "$CUDA_ARCH" == 90* ]] &&
    ! grep -q '^MOETRAIN_CUDA_CUTLASS:INTERNAL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
    echo "gpu-bundle: the build has no CUTLASS grouped kernels (run tools/install-deps.sh for the" \
        "nvidia-cutlass headers, or set -DMOETRAIN_CUTLASS_DIR)" >&2
    exit 1
fi
for f in moetrain moetrain_tests libmoetrain_backend_cuda.so; do
    if [ ! -f "$BUILD/$f" ]; then
        echo "gpu-bundle: $BUILD/$f was not built (is the CUDA Toolkit found? see the configure output)" >&2
        exit 1
    fi
done

stage="$OUT/$NAME"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/bench"
cp "$BUILD/moetrain" "$BUILD/moetrain_tests" "$BUILD/libmoetrain_backend_cuda.so" "$stage/bin/"
cp -P "$BUILD"/libmoetrain.so* "$stage/bin/"
cp bench/pytorch_peer_cuda.py bench/compare_pytorch.py bench/attention_sdpa.py \
    bench/gemm_torch_cuda.py "$stage/bench/"

# Every library the binaries load (ldd lists the whole closure), outside the base system,
# copied under its soname.
elfs=("$stage"/bin/moetrain "$stage"/bin/moetrain_tests "$stage"/bin/libmoetrain_backend_cuda.so
    "$stage"/bin/libmoetrain.so)
missing=$(for e in "${elfs[@]}"; do ldd "$e"; done | awk '/not found/ {print $1}' | sort -u |
    grep -v '^libmoetrain' || true)
if [ -n "$missing" ]; then
    echo "gpu-bundle: libraries not found here: $missing" >&2
    exit 1
fi
for e in "${elfs[@]}"; do ldd "$e"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    sort -u | while read -r soname path; do
        case "$soname" in libmoetrain*) continue ;; esac
        if grep -Eq "$base_system" <<<"$soname"; then continue; fi
        cp -L "$path" "$stage/lib/$soname"
    done
strip --strip-unneeded "$stage"/bin/moetrain "$stage"/bin/moetrain_tests \
    "$stage"/bin/*.so* "$stage"/lib/*.so* 2>/dev/null || true

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=""
if git status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then
    dirty=" (with uncommitted changes)"
fi
cat >"$stage/BUNDLE_INFO" <<EOF
commit=$commit$dirty
built=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)
nvcc=$(nvcc --version 2>/dev/null | tail -1)
cuda_arch=$CUDA_ARCH
source_root=$ROOT
build_dir=$(cd "$BUILD" && pwd)
EOF

# env.sh: `source DIR/env.sh [CHECKOUT]` puts the bundle's bin/ and lib/ first on
# LD_LIBRARY_PATH (ahead of the binaries' RUNPATH) and, where the build machine's source path
# does not exist, links it to CHECKOUT: the doctest binary reads a few source files (the op
# coverage test) through the path baked in at build time.
cat >"$stage/env.sh" <<'EOF'
# Sourced: sets MOETRAIN_BUNDLE and LD_LIBRARY_PATH; links the baked source path (BUNDLE_INFO)
# to the checkout given as $1 when that path is missing here.
MOETRAIN_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export MOETRAIN_BUNDLE
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    if [ -d "$d" ]; then cuda_lib=":$d"; break; fi
done
export LD_LIBRARY_PATH="$MOETRAIN_BUNDLE/bin:$MOETRAIN_BUNDLE/lib$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN, which the CUDA module loads at run time for attention: a GPU host with PyTorch has it
# in PyPI's nvidia-cudnn wheel (site-packages/nvidia/cudnn/lib), not under /usr/local/cuda.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' && [ ! -e "${cuda_lib#:}/libcudnn.so.9" ]; then
    cudnn_so=$(for sp in $(${PYTHON:-python3} -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        find "$sp/nvidia" -maxdepth 3 -name libcudnn.so.9 2>/dev/null; done | head -1)
    if [ -n "$cudnn_so" ]; then
        export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cudnn_so")"
        echo "env.sh: cuDNN from $(dirname "$cudnn_so")"
    else
        echo "env.sh: no libcudnn.so.9 found: attention runs moetrain's own kernels" >&2
    fi
fi
src_root=$(sed -n 's/^source_root=//p' "$MOETRAIN_BUNDLE/BUNDLE_INFO")
if [ -n "${1:-}" ] && [ -n "$src_root" ] && [ ! -e "$src_root" ]; then
    if mkdir -p "$(dirname "$src_root")" 2>/dev/null && ln -s "$(cd "$1" && pwd)" "$src_root" 2>/dev/null; then
        echo "env.sh: linked $src_root -> $1 (the source path baked into the build)"
    else
        echo "env.sh: cannot link $src_root -> $1: the op coverage test will not find the sources" >&2
    fi
fi
EOF

tarball="$OUT/$NAME.tar.xz"
tar -C "$OUT" -cJf "$tarball" "$NAME"

# The check: each binary's libraries resolve from the bundle or the base system only.
bad=0
for e in "${elfs[@]}"; do
    while read -r soname path; do
        case "$path" in "$stage"/*) continue ;; esac
        if grep -Eq "$base_system" <<<"$soname"; then continue; fi
        echo "gpu-bundle: $(basename "$e") loads $soname from $path (not carried)" >&2
        bad=1
    done < <(LD_LIBRARY_PATH="$stage/bin:$stage/lib" ldd "$e" | awk '$2 == "=>" {print $1, $3}')
done
size_mb=$(( $(stat -c %s "$tarball") / 1048576 ))
echo "gpu-bundle: $tarball: ${size_mb} MB ($(du -sh "$stage" | cut -f1) unpacked), carried libraries: $(cd "$stage/lib" && echo *)"
if [ "$size_mb" -ge "$SIZE_MB" ]; then
    echo "gpu-bundle: the bundle is over ${SIZE_MB} MB" >&2
    bad=1
fi
exit $bad
