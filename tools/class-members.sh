#!/bin/bash
# Usage: tools/class-members.sh HEADER CLASS. Prints how many public fields and methods CLASS
# declares in HEADER (docs/ARCHITECTURE.md measures ModelImpl with it). A member is a
# declaration at member indentation between "public:" and the next access label; a method
# has a name followed by "(" (deleted ones are not counted); a field is anything else, each
# comma-separated name counted.
awk -v cls="$2" '
  $0 ~ "^class " cls " " { inc=1; pub=0; next }
  inc && /^};/ { inc=0 }
  inc && /^  public:/ { pub=1; next }
  inc && /^  (private|protected):/ { pub=0; next }
  inc && pub && /^    [A-Za-z~]/ && !/^    \/\// && !/= delete;/ {
    line=$0; sub(/\/\/.*/, "", line)
    if (line ~ /[ ~][A-Za-z_][A-Za-z0-9_]*\(/) m++
    else { gsub(/ = [^,;]*/, "", line); gsub(/<[^;]*>/, "", line); f += gsub(/,/, ",", line) + 1 }
  }
  END { printf "%s: %d public fields, %d public methods\n", cls, f, m }' "$1"
