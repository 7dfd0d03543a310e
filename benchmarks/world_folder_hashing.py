"""A world folder holding a big file: loading it (its version hashes every file) cold, warm, and the old way.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/world_folder_hashing.py [--mib 200] [--reps 5]

The notes world (tests/worlds/notes) is copied with one extra file of ``--mib`` MiB of random bytes.
Each repetition runs, in a fresh process (as ``rehearsal world list`` is one), with a fresh state home:

- ``cold``: ``world_version(load_world_folder(copy))`` with no digest cache (every file streamed);
- ``warm``: the same again, the digest cache in the home filled by ``cold``;
- ``whole``: the obvious alternative this replaced, ``hashlib.sha256(path.read_bytes())`` per file.

Printed: median seconds and peak resident memory (MiB) of each, and the ratios to ``whole``. A file
above the bound (256 MiB) is refused from its size alone: ``--mib 2048`` shows that cost too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "tests" / "worlds" / "notes"

CHILD = r"""
import hashlib, json, resource, sys, time
from pathlib import Path
mode, folder = sys.argv[1], Path(sys.argv[2])
started = time.perf_counter()
result = "ok"
if mode == "whole":
    digests = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted(folder.rglob("*")) if p.is_file()}
else:
    from rehearsal_env.identity import world_version
    from rehearsal_env.worlds import WorldFolderError, load_world_folder
    try:
        world_version(load_world_folder(folder))
    except WorldFolderError as exc:
        result = "refused: " + str(exc)[:80]
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "result": result}))
"""


def _child(mode: str, folder: Path, home: Path) -> dict[str, object]:
    env = {**os.environ, "REHEARSAL_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(folder)], capture_output=True, text=True,
                          env=env, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=200, help="size of the extra file (default 200)")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "notes"
        shutil.copytree(NOTES, folder)
        with open(folder / "big.bin", "wb") as fh:
            for _ in range(args.mib):
                fh.write(os.urandom(2**20))
        figures: dict[str, list[dict[str, object]]] = {"cold": [], "warm": [], "whole": []}
        for rep in range(args.reps):
            home = Path(tmp) / f"home-{rep}"
            figures["cold"].append(_child("cold", folder, home))
            figures["warm"].append(_child("warm", folder, home))
            if args.mib <= 1024:
                figures["whole"].append(_child("whole", folder, home))
    base = statistics.median(float(f["seconds"]) for f in figures["whole"]) if figures["whole"] else None  # type: ignore[arg-type]
    print(f"world folder with a {args.mib} MiB file, {args.reps} fresh processes each (median):")
    for mode, runs in figures.items():
        if not runs:
            continue
        seconds = statistics.median(float(r["seconds"]) for r in runs)  # type: ignore[arg-type]
        rss = statistics.median(float(r["rss_mib"]) for r in runs)  # type: ignore[arg-type]
        ratio = f"  {seconds / base:.3f}x whole" if base else ""
        print(f"  {mode:<6} {seconds:8.3f} s  peak RSS {rss:7.1f} MiB{ratio}  ({runs[0]['result']})")


if __name__ == "__main__":
    main()
