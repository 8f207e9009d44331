#!/usr/bin/env bash
# `pip install .` end to end: a fresh venv, a wheel built from this source tree by
# scikit-build-core (a full build of the library; ccache makes repeats cheap), then the
# package's pytest suite against the installed package and its own CLI binary, and the
# `moetrain` command from the PATH.
#   run_pip_test.sh PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
PY=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
"$PY" -m venv --system-site-packages "$WORK/venv"   # Debian's numpy, as the test venv
V="$WORK/venv/bin"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
start=$(date +%s)
"$V/pip" install -q --disable-pip-version-check "pytest==8.3.3" "numpy<2"
"$V/pip" install -q --disable-pip-version-check "$SRC" "${launcher[@]}" \
  --config-settings=cmake.define.MOETRAIN_WITH_CUDA=OFF \
  --config-settings=build-dir="$WORK/build"
echo "pip install . took $(( $(date +%s) - start )) s"
site=$("$V/python" -c "import moetrain, os; print(os.path.dirname(moetrain.__file__))")
case "$site" in "$WORK"/venv/*) ;; *) echo "imported moetrain from $site, not the venv"; exit 1;; esac
ls "$site"
test -x "$site/moetrain" && test -f "$site/_moetrain.pyi" && test -f "$site/py.typed"
PATH="$V:$PATH" moetrain --version
PATH="$V:$PATH" moetrain info
cd "$SRC/python/tests"
"$V/python" -m pytest -q -p no:cacheprovider --basetemp="$WORK/pytest" .
