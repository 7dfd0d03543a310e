"""What a forwarded request costs: `rehearsal serve --workers 2`, steps answered by the worker that received
them against steps forwarded to the episode's owner, in one run.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/serve_workers.py [--episodes 30]

One ``rehearsal serve --workers 2`` child (recording into a temporary folder); one client plays
``--episodes`` reference episodes of shop one after another with a new connection for every request
(so requests land on either worker, as behind a load balancer that does not route on the id). Each
step is classed by the answer's ``x-rehearsal-forwarded-by`` header: answered where it landed, or
forwarded. Printed: steps of each class, p50/p99 ms, and the forwarded / direct ratio of the medians.
Both classes pay the same new TCP connection; the difference is the loopback hop to the owner.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import rehearsal_env
from rehearsal_env.agents import make_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import listening_url  # noqa: E402  (benchmarks/serve.py: the address a started server prints)

SCENARIOS = ("refund-item-0001", "refund-item-0002", "cancel-order-0001")
CLI = "import sys; from rehearsal_env.cli import main; sys.exit(main())"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()
    world = rehearsal_env.load_world("shop")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "served"
        proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--world", "shop", "--workers", "2", "--port",
                                 "0", "--out", str(out)], stdout=subprocess.PIPE, text=True)
        try:
            url = listening_url(proc)
            while len([p for p in (out / ".workers").glob("*.json") if json.loads(p.read_text())["state"]
                       == "serving"]) < 2 if (out / ".workers").exists() else True:
                time.sleep(0.1)
            timings: dict[str, list[float]] = {"direct": [], "forwarded": []}
            fresh = httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
            with httpx.Client(base_url=url, transport=fresh, timeout=60) as http:
                for n in range(args.episodes):
                    scenario = world.scenario(SCENARIOS[n % len(SCENARIOS)])
                    started = http.post("/v1/episodes", json={"world": "shop", "scenario": scenario.id}).json()
                    agent, observation, index = make_agent("reference", scenario), started["observation"], 0
                    info = {"tools": started["tools"]}
                    while True:
                        body = {"action": agent(observation, info), "step_index": index}
                        began = time.perf_counter()
                        r = http.post(f"/v1/episodes/{started['episode_id']}/step", json=body)
                        took = (time.perf_counter() - began) * 1000
                        assert r.status_code == 200, r.text
                        kind = "forwarded" if "x-rehearsal-forwarded-by" in r.headers else "direct"
                        timings[kind].append(took)
                        result = r.json()
                        index, observation = result["step_index"], result["observation"]
                        if result["terminated"] or result["truncated"]:
                            break
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    print(f"{'steps':>10} {'n':>5} {'p50 ms':>8} {'p99 ms':>8}")
    for kind, values in timings.items():
        if values:
            print(f"{kind:>10} {len(values):>5} {statistics.median(values):>8.2f} {percentile(values, 0.99):>8.2f}")
    if timings["direct"] and timings["forwarded"]:
        ratio = statistics.median(timings["forwarded"]) / statistics.median(timings["direct"])
        print(f"forwarded / direct (p50): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
