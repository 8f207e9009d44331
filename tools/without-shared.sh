#!/usr/bin/env bash
# Runs a command with ../shared (the folder beside the clone that the development machines and CI
# have) hidden under an empty read-only tmpfs, so that the command sees what a user's fresh clone
# sees: nothing beside the repository. tools/test.sh runs the ctest suite through it; a test that
# reads ../shared then fails in CI as it would for a user.
#   bash tools/without-shared.sh CMD [ARG...]
# It needs a private mount namespace (`unshare -m` as root, else a user namespace with
# `unshare -rm`); where neither is allowed, or there is no ../shared, it says so and runs CMD as is.
set -euo pipefail
shared="$(cd "$(dirname "$0")/../.." && pwd)/shared"
if [ ! -d "$shared" ]; then
  exec "$@"
fi
hide='mount -t tmpfs -o ro,size=4k moetrain-no-shared "$0" && exec "$@"'
for ns in "-m" "-rm"; do
  if unshare $ns --propagation private true 2>/dev/null; then
    echo "without-shared: $shared hidden for: $*"
    exec unshare $ns --propagation private sh -c "$hide" "$shared" "$@"
  fi
done
echo "without-shared: no mount namespace here; running with $shared visible: $*" >&2
exec "$@"
