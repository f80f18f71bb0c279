#!/usr/bin/env bash
# Build every Strata container image from the repository root (one Dockerfile per images/<name>/).
#   hack/build-images.sh [--push]        REGISTRY=ghcr.io/strata-dev/ TAG=0.1.0 by default
# Without a reachable Docker engine it says so and exits 0 (CI machines and laptops without Docker).
set -euo pipefail
cd "$(dirname "$0")/.."

REGISTRY="${REGISTRY:-ghcr.io/strata-dev/}"
TAG="${TAG:-$(node -p 'require("./package.json").version')}"
PUSH=false
[ "${1:-}" = "--push" ] && PUSH=true

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "build-images: no Docker engine available; nothing built."
  exit 0
fi

built=()
for dockerfile in images/*/Dockerfile; do
  name="$(basename "$(dirname "$dockerfile")")"
  image="${REGISTRY}${name}:${TAG}"
  echo "build-images: building ${image}"
  docker build --file "$dockerfile" --tag "$image" .
  if $PUSH; then docker push "$image"; fi
  built+=("$image")
done
printf 'build-images: built %s\n' "${built[@]}"
