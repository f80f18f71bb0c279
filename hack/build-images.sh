#!/usr/bin/env bash
# Build every Strata container image from the repository root: first the stages they all start from
# (hack/images/Dockerfile, tagged strata-build:<TAG> and strata-runtime:<TAG> in the local engine, not
# pushed), then each images/<name>/Dockerfile on them.
#   hack/build-images.sh [--push]        REGISTRY=ghcr.io/strata-dev/ TAG=package.json's version by default
#   CUDA=1 hack/build-images.sh          also model-server:<TAG>-cuda and image-search:<TAG>-cuda, what GPU
#                                        ModelServers and GPU ImageIndex workers run (onnxruntime's CUDA 12
#                                        provider on an nvidia/cuda base)
# Without a reachable Docker engine it says so and exits 0 (CI machines and laptops without Docker),
# except with --push: a release step that pushes nothing must fail (exit 1), not pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."

REGISTRY="${REGISTRY:-ghcr.io/strata-dev/}"
CUDA="${CUDA:-}"
CUDA_RUNTIME_IMAGE="${CUDA_RUNTIME_IMAGE:-nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04}"
TAG="${TAG:-$(node -p 'require("./package.json").version')}"
PUSH=false
[ "${1:-}" = "--push" ] && PUSH=true

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  if $PUSH; then
    echo "build-images: --push needs a Docker engine and none is available; nothing built or pushed." >&2
    exit 1
  fi
  echo "build-images: no Docker engine available; nothing built."
  exit 0
fi

# shared <tag> [docker build options]: the shared build and runtime stages, as strata-build:<tag> and strata-runtime:<tag>.
shared() {
  local tag="$1"
  shift
  for target in build runtime; do
    echo "build-images: building strata-${target}:${tag}"
    docker build --file hack/images/Dockerfile --target "$target" --tag "strata-${target}:${tag}" "$@" .
  done
}

built=()
# image <name> <tag>: images/<name>/Dockerfile as <name>:<tag>, on the shared stages of the same tag.
image() {
  local image="${REGISTRY}$1:$2"
  echo "build-images: building ${image}"
  docker build --file "images/$1/Dockerfile" --tag "$image" \
    --build-arg BUILD_IMAGE="strata-build:$2" --build-arg RUNTIME_IMAGE="strata-runtime:$2" .
  if $PUSH; then docker push "$image"; fi
  built+=("$image")
}

shared "$TAG"
for dockerfile in images/*/Dockerfile; do
  image "$(basename "$(dirname "$dockerfile")")" "$TAG"
done
if [ -n "$CUDA" ]; then
  shared "${TAG}-cuda" --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 --build-arg RUNTIME_BASE=cuda-base --build-arg CUDA_IMAGE="$CUDA_RUNTIME_IMAGE"
  for name in model-server image-search; do
    image "$name" "${TAG}-cuda"
  done
fi
printf 'build-images: built %s\n' "${built[@]}"
