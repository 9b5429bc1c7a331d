#!/usr/bin/env bash
# Checks the container image's build without a Docker engine (run by `make test`):
#  1. copies the tree as .dockerignore filters it and assembles the build stage's WORKDIR as the Dockerfile's
#     COPY lines do, running `swift package resolve` where the Dockerfile does (scripts/docker_context.py);
#  2. checks that the manifest loads there and that every file the `maidian` product builds from is there,
#     byte for byte (`docker_context.py verify`): a file the build needs but the context or the COPY lines
#     leave out fails here. The tree itself builds (`make test` builds it), so the copy would too; compiling
#     it again from scratch took 3 to 4 minutes of CI on two cores;
#  3. validates docker-compose.yml with every profile (`docker-compose config`).
# Dependency checkouts come from SwiftPM's shared cache. KEEP=1 keeps the copy for a look.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/maidian-build-context.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
python3 scripts/docker_context.py assemble "$work"
echo "build context: $(find "$work/context" -type f | wc -l) files, $(du -sh "$work/context" | cut -f1)"
python3 scripts/docker_context.py verify "$work" maidian || { echo "check-build-context: the build stage lacks what the maidian product builds from" >&2; exit 1; }

COMPOSE_PROFILES=monitoring docker-compose -f docker-compose.yml config -q
echo "docker-compose.yml (with profile monitoring): ok"
