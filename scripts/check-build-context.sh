#!/usr/bin/env bash
# Checks the container image's build without a Docker engine (run by `make test`):
#  1. copies the tree as .dockerignore filters it, assembles the build stage's WORKDIR as the Dockerfile's
#     COPY lines do (running `swift package resolve` where the Dockerfile does), and builds the `maidian`
#     product there: a file the build needs but the context or the COPY lines leave out fails here;
#  2. validates docker-compose.yml with every profile (`docker-compose config`).
# The copy reuses no build products (a debug build of one product: several minutes on 2 cores); dependency
# checkouts come from SwiftPM's shared cache. KEEP=1 keeps the copy for a look.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}

work=$(mktemp -d "${TMPDIR:-/tmp}/maidian-build-context.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
python3 scripts/docker_context.py assemble "$work"
echo "build context: $(find "$work/context" -type f | wc -l) files, $(du -sh "$work/context" | cut -f1); building the maidian product in the copy"
(cd "$work/src" && "$SWIFT" build --product maidian 2>&1 | grep -E "error|warning: .*(missing|invalid)|Compiling maidian|complete" || true)
test -x "$work/src/.build/debug/maidian" || { echo "check-build-context: the filtered copy does not build" >&2; exit 1; }
"$work/src/.build/debug/maidian" --version >/dev/null
echo "build context: builds"

COMPOSE_PROFILES=monitoring docker-compose -f docker-compose.yml config -q
echo "docker-compose.yml (with profile monitoring): ok"
