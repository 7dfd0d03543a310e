#!/usr/bin/env bash
# The GPU command kept ready (issue 34): training/learn.py's pre-registered procedure at GPU scale on one H100/H200.
#
#   bash training/gpu/run.sh check [OUT]   # minutes: the preflight, then learn.py --smoke on the GPU (every arm)
#   bash training/gpu/run.sh [OUT]         # hours: training/configs/learn-gpu.toml (holdout read once, counted)
#
# The machine has CUDA torch and no internet. Everything else comes from the repository: the package itself
# (PYTHONPATH, nothing to build) and, when training/gpu/wheelhouse/ exists (made beforehand on a machine that
# reaches the registry with training/gpu/wheelhouse.sh), the trl/live extras installed from it with --no-index.
# Without a wheelhouse the script requires those packages already installed and names what is missing.
# What the run should reproduce, and what it may not be read as, is in docs/learning.md ("The GPU run").
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=full
if [[ "${1:-}" == "check" ]]; then mode=check; shift; fi
out="${1:-runs/learn-gpu}"
python="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRL_EXPERIMENTAL_SILENCE=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  || { echo "run.sh: error: nvidia-smi found no GPU; run this on the machine with the accelerator" >&2; exit 2; }
if [[ -d training/gpu/wheelhouse ]]; then
  "$python" -m pip install --quiet --no-index --find-links training/gpu/wheelhouse \
    -r training/gpu/requirements.txt
fi
"$python" - <<'PY'
import re, sys
from importlib import metadata
import torch
if not torch.cuda.is_available():
    sys.exit(f"run.sh: error: torch {torch.__version__} sees no CUDA device; install a CUDA build of torch")
names = [re.split(r"[\[<>=]", line.strip())[0] for line in open("training/gpu/requirements.txt")
         if line.strip() and not line.startswith("#")]
missing = []
for name in names:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit(f"run.sh: error: {', '.join(missing)} not installed; make training/gpu/wheelhouse with "
             "training/gpu/wheelhouse.sh where the registry is reachable, or pip install -r training/gpu/requirements.txt")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
PY

if [[ "$mode" == "check" ]]; then
  # the whole pipeline at toy size on the GPU: SFT, both GRPO arms, every arm served and read on holdout
  exec "$python" training/learn.py --smoke --device cuda --world analytics --out "${out}-check"
fi
exec "$python" training/learn.py --config training/configs/learn-gpu.toml --out "$out"
