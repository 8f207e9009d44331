#!/bin/sh
# Compiler launcher for the CUDA kernel objects: runs the nvcc command line given after the log
# directory and keeps its complete stderr (the `-Xptxas -v` resource report of every kernel and
# architecture) in <log dir>/<object name>.ptxas.log for check_ptxas.cmake. Anything that is not
# a ptxas/nvlink info line (warnings, errors) is still shown on the console.
# Usage (CMake CUDA_COMPILER_LAUNCHER): ptxas_log.sh LOG_DIR nvcc ARGS...
set -u
log_dir=$1
shift
obj=unknown
prev=
for a in "$@"; do
    if [ "$prev" = "-o" ]; then obj=$(basename "$a"); fi
    prev=$a
done
mkdir -p "$log_dir"
log="$log_dir/$obj.ptxas.log"
"$@" 2>"$log.tmp"
rc=$?
grep -v -E '^ptxas info|^ptxas +info|^    (Compile time|Function properties|[0-9]+ bytes (stack|spill))|^ *Used [0-9]+ registers' "$log.tmp" >&2
mv "$log.tmp" "$log"
exit $rc
