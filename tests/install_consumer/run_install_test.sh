#!/usr/bin/env bash
# cmake --install into a scratch prefix, then configure, build and run a consumer project
# that finds the package with find_package(moetrain).
set -euo pipefail
build_dir=$1; src_dir=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/moetrain/moetrain.h"
ls "$work/prefix"/lib*/libmoetrain.so* > /dev/null
ls "$work/prefix"/bin/moetrain > /dev/null
for m in "$build_dir"/libmoetrain_backend_*.so; do   # every built module is installed
  [ -e "$m" ] || continue
  ls "$work/prefix"/lib*/"$(basename "$m")" > /dev/null
done
cmake -S "$src_dir" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
"$work/consumer/consumer"
"$work/prefix/bin/moetrain" info
