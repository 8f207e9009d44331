#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++, CUDA or OpenCL C file differs from what clang-format makes
# of it with the repo's .clang-format, and lists those files; `tools/format-check.sh --fix`
# formats them in place instead. CI runs the check (tools/test.sh).
#
# Files: *.cpp *.h (C++), *.cu *.cuh (CUDA: C++ to clang-format, which parses CUDA's
# qualifiers and launch syntax), *.cl *.clh (OpenCL C: C99 whose address-space qualifiers
# clang-format reads as plain identifiers; the kernels contain no #include lines that sorting
# could reorder, and formatted kernels stay within the 100 columns). All are formatted because
# all are hand-written code that people read and diff; nothing generated is tracked.
# Version: clang-format 14 (Debian 12), the one tools/install-deps.sh installs; other versions
# format some constructs differently, so the check insists on 14.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-14 || echo clang-format)}
version=$("$CLANG_FORMAT" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
  echo "format-check: needs clang-format 14, found '$("$CLANG_FORMAT" --version)'" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh' '*.cl' '*.clh')
if [ "${1:-}" = --fix ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$(nproc)" "$CLANG_FORMAT" -i
  exit 0
fi
# One clang-format run over every file; its diagnostics start with the file's name.
mapfile -t bad < <("$CLANG_FORMAT" --dry-run -Werror "${files[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "format-check: ${#bad[@]} of ${#files[@]} files are not clang-format clean (fix: bash tools/format-check.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format-check: ${#files[@]} files clean"
