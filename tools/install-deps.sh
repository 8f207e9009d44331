#!/usr/bin/env bash
# Installs the Debian 12 packages moetrain builds and tests with (docs/DEPENDENCIES.md says why
# each is there). The CUDA Toolkit is not a Debian package: the CUDA backend is built when
# nvcc is found (e.g. /usr/local/cuda/bin), and skipped with a configure message otherwise.
set -euo pipefail
pkgs=(build-essential cmake git pkg-config python3 python3-dev python3-venv python3-torch ccache
      libdnnl-dev libopenblas-dev
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libclblast-dev
      doctest-dev libcli11-dev nlohmann-json3-dev
      libsentencepiece-dev libicu-dev libopenmpi-dev openmpi-bin
      clang libclang-rt-14-dev clang-format-14 clang-tidy-19 libomp-19-dev
      chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "moetrain: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Test-only Python references from PyPI (tools/requirements-test.txt), in a venv over Debian's
# python3-torch. Reinstalled only when the requirements file changes.
PYENV=${MOETRAIN_PYENV:-$HOME/.cache/moetrain/pyenv}
if [ ! -x "$PYENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$PYENV"
fi
stamp="$PYENV/.moetrain-requirements"
if ! cmp -s tools/requirements-test.txt "$stamp"; then
  echo "moetrain: installing the Python test references into $PYENV"
  "$PYENV/bin/pip" install -q --disable-pip-version-check -r tools/requirements-test.txt
  cp tools/requirements-test.txt "$stamp"
fi

# CUTLASS's C++ headers for the CUDA backend's grouped GEMM on Hopper (docs/DEPENDENCIES.md),
# from PyPI's nvidia-cutlass wheel. Only its headers are used, so it is installed without its
# Python dependencies; backends/cuda/CMakeLists.txt finds them in this venv.
CUTLASS_VERSION=4.2.0.0
if ! "$PYENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-cutlass') != '$CUTLASS_VERSION')" 2>/dev/null; then
  echo "moetrain: installing the CUTLASS $CUTLASS_VERSION headers (nvidia-cutlass) into $PYENV"
  "$PYENV/bin/pip" install -q --disable-pip-version-check --no-deps "nvidia-cutlass==$CUTLASS_VERSION"
fi

# cudnn-frontend's C++ headers (header-only) for the CUDA backend's cuDNN attention
# (docs/DEPENDENCIES.md), from PyPI's nvidia-cudnn-frontend wheel, which puts them under the
# venv's site-packages/include; installed without its Python dependencies. cuDNN itself comes
# with the CUDA Toolkit here (cudnn.h) and is loaded at run time.
CUDNN_FRONTEND_VERSION=1.32.0
if ! "$PYENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-cudnn-frontend') != '$CUDNN_FRONTEND_VERSION')" 2>/dev/null; then
  echo "moetrain: installing the cudnn-frontend $CUDNN_FRONTEND_VERSION headers (nvidia-cudnn-frontend) into $PYENV"
  "$PYENV/bin/pip" install -q --disable-pip-version-check --no-deps "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
fi
