#!/usr/bin/env bash
# Build every Strata container image from the repository root (one Dockerfile per images/<name>/).
#   hack/build-images.sh [--push]        REGISTRY=ghcr.io/strata-dev/ TAG=0.1.0 by default
#   CUDA=1 hack/build-images.sh          also model-server:<TAG>-cuda and image-search:<TAG>-cuda, what GPU
#                                        ModelServers and GPU ImageIndex workers run (onnxruntime's CUDA 12
#                                        provider on an nvidia/cuda base)
# Without a reachable Docker engine it says so and exits 0 (CI machines and laptops without Docker).
set -euo pipefail
cd "$(dirname "$0")/.."

REGISTRY="${REGISTRY:-ghcr.io/strata-dev/}"
CUDA="${CUDA:-}"
CUDA_RUNTIME_IMAGE="${CUDA_RUNTIME_IMAGE:-nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04}"
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
if [ -n "$CUDA" ]; then
  for name in model-server image-search; do
    image="${REGISTRY}${name}:${TAG}-cuda"
    echo "build-images: building ${image}"
    docker build --file "images/${name}/Dockerfile" --tag "$image" \
      --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 --build-arg RUNTIME_IMAGE="$CUDA_RUNTIME_IMAGE" .
    if $PUSH; then docker push "$image"; fi
    built+=("$image")
  done
fi
printf 'build-images: built %s\n' "${built[@]}"
