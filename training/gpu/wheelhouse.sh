#!/usr/bin/env bash
# Make training/gpu/wheelhouse/ on a machine that reaches the package registry, for training/gpu/run.sh on a machine
# that does not (same Python minor version and platform as the GPU machine: pass them, e.g. PY=3.11 PLATFORM=manylinux_2_28_x86_64).
# llama-cpp-python has no wheel on the registry for most platforms: its sdist is kept and pip builds it (CPU) there.
set -euo pipefail
cd "$(dirname "$0")"
args=()
if [[ -n "${PY:-}" ]]; then args+=(--python-version "$PY" --only-binary=:all:); fi
if [[ -n "${PLATFORM:-}" ]]; then args+=(--platform "$PLATFORM"); fi
python3 -m pip download --dest wheelhouse "${args[@]}" -r requirements.txt
python3 -m pip download --dest wheelhouse --no-deps scikit-build-core cmake ninja  # to build llama-cpp-python offline
