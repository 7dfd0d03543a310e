"""Phase 9, *package*: the validated jobs as scenario files, and the compile's page (``COMPILE.md``).

``scenarios/{train,dev,holdout}.toml`` hold only the jobs the gate kept, each with the request,
scope, goal checks, hard rules, reference and wrong solutions; ``COMPILE.md`` lists every job with
its proof (the gate's five findings) and every job kept out with its reason. Both are written the
same bytes for the same phase results.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..versions import CHECK_LABELS
from . import _toml

SPLITS = ("train", "dev", "holdout")


def _check(c: Mapping[str, Any]) -> dict[str, Any]:
    out = {"name": c["name"], "op": c["op"], "want": c["want"], "sql": c["sql"]}
    if c.get("params"):
        out["params"] = list(c["params"])
    return out


def scenario_toml(job: Mapping[str, Any]) -> str:
    """One ``[[scenario]]`` table."""
    calls = [{"tool": c["tool"], "args": dict(c.get("args", {}))} for c in job["reference"]["calls"]]
    text = _toml.table("scenario", {
        "id": job["id"], "split": job["split"], "role": job["role"], "category": job["category"],
        "request": job["request"], "scope": list(job.get("scope", [])),
        "goal_checks": [_check(c) for c in job["goal_checks"]],
        "hard_rules": [_check(c) for c in job.get("hard_rules", [])],
        "faults": [{"tool": f["tool"], "kind": f["kind"]} for f in job.get("faults", [])] or None,
        "reference": {"calls": calls}}, array=True)
    for w in job.get("wrong", []):
        text += _toml.table("scenario.wrong", {"name": w["name"], "on_unknown": w.get("on_unknown"), "calls": [
            {"tool": c["tool"], "args": dict(c.get("args", {}))} for c in w["calls"]]}, array=True)
    return text


def _app_digest(inspected: Mapping[str, Any]) -> str:
    """The application's files as one digest (their paths and hashes), never where the source lies."""
    files = inspected["application"]["files"]
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()[:16]


def _page(results: Mapping[str, Any], kept: list[dict[str, Any]], out: list[dict[str, Any]]) -> str:
    inspected = results["inspect"]
    lines = [f"# {inspected['name']}: compiled\n",
             f"Compiled by `rehearsal world compile` from an application of "
             f"{len(inspected['application']['files'])} files (digest {_app_digest(inspected)}); where it ran is "
             "in .compile/02-plan.json, not here: the folder is the same wherever it was compiled.\n",
             f"**{len(kept)} jobs validated** over {len({j['category'] for j in kept})} kinds of work; "
             f"{len(out)} kept out.\n", "| split | jobs |", "|---|---|"]
    counts = Counter(j["split"] for j in kept)
    lines += [f"| {s} | {counts.get(s, 0)} |" for s in SPLITS]
    lines.append("\n| role | writes its validated jobs use (the application accepted them for its identity) |")
    lines.append("|---|---|")
    op_of = {w["tool"]: w["op"] for w in results["adapt"]["writes"]}
    for role in results["adapt"]["roles"]:
        used = sorted({op_of[n] for j in kept if j["role"] == role["name"] for n in j["category"].split("-then-")
                       if n in op_of})
        lines.append(f"| {role['name']} | {', '.join(used) or 'none'} |")
    seeded = results["seed"]
    if seeded.get("api"):
        api = seeded["api"]
        lines.append(f"\nData: {'the ' + seeded['from'] + ' seed, then ' if seeded['from'] != 'api' else ''}"
                     f"{api['kept']} of {api['sent']} writes sent through the application's own API "
                     f"({', '.join(f'{op} {n}' for op, n in api['kept_by_operation'].items())}); not kept: "
                     f"{api['refused'] or 'none'}, undone for a policy: {api['undone'] or 'none'} "
                     "(see .compile/05-seed.json).")
    author = results["author"]
    if author.get("model"):
        m = author["model"]
        lines.append(f"\nModel: `{m['model']}`, prompts {m['prompt_version']}, seed {m['seed']}: "
                     f"{m['proposed']} proposed, {sum(1 for j in kept if j.get('origin') == 'model')} kept.\n")
    lines.append("\n## Jobs and their proof\n")
    for job in kept:
        lines.append(f"### `{job['id']}` ({job['split']}, {job['origin']})\n\n{job['request']}\n")
        for name, label in CHECK_LABELS.items():
            lines.append(f"- {label}: {job['proof'].get(name, '')}")
        if job.get("repaired"):
            lines.append(f"- repaired: {job['repaired']}")
        lines.append("")
    lines.append("## Kept out\n")
    lines += [f"- `{j['id']}` ({j.get('origin')}): {j['reason']}" for j in out] or ["None."]
    lines += ["\n## Writes without a job\n", *([f"- `{tool}`: {why}" for tool, why in no_job(results).items()]
                                               or ["None."])]
    from_app = inspected.get("schema_from_app") or {}
    if from_app.get("kept_out"):
        lines.append("\n## Tables kept out of the world\n")
        lines += [f"- `{table}`: {why}" for table, why in sorted(from_app["kept_out"].items())]
    return "\n".join(lines) + "\n"


def no_job(results: Mapping[str, Any]) -> dict[str, str]:
    """Each write tool no validated job uses, with what its tries showed (or that nothing was found to try)."""
    used = {n for j in results["validate"]["kept"] for n in j["category"].split("-then-")}
    tried: dict[str, list[dict[str, Any]]] = {}
    for t in results["author"]["tried"]:
        tried.setdefault(t["tool"], []).append(t)
    out: dict[str, str] = {}
    for w in results["adapt"]["writes"]:
        if w["tool"] in used:
            continue
        mine = tried.get(w["tool"], [])
        if not mine:
            out[w["tool"]] = ("never tried: exploring the reads found no resource for it, or no values for its "
                              "required arguments")
            continue
        statuses = Counter(str(t["status"]) for t in mine)
        unchanged = sum(1 for t in mine if 200 <= int(t["status"]) < 300 and not t["changed"])
        breaking = sum(1 for t in mine if t["breaks"])
        out[w["tool"]] = (f"tried {len(mine)} time(s); the application answered "
                          + ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items()))
                          + (f"; {unchanged} accepted changed nothing" if unchanged else "")
                          + (f"; {breaking} broke a stated policy" if breaking else "")
                          + ("; its jobs did not pass the gate (above)" if any(
                              200 <= int(t["status"]) < 300 and t["changed"] and not t["breaks"] for t in mine)
                             else ""))
    return out


def package(world_dir: Path, results: Mapping[str, Any]) -> dict[str, Any]:
    """Write the scenario files and COMPILE.md; the package phase's result (without the version id)."""
    kept = list(results["validate"]["kept"])
    out = list(results["validate"]["kept_out"])
    folder = world_dir / "scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        mine = [j for j in kept if j["split"] == split]
        text = f"# Written by `rehearsal world compile`: the jobs of the {split} split that passed the gate.\n"
        text += "".join("\n" + scenario_toml(j) for j in mine)
        write_atomic(folder / f"{split}.toml", text)
    write_atomic(world_dir / "COMPILE.md", _page(results, kept, out))
    op_of = {w["tool"]: w["op"] for w in results["adapt"]["writes"]}
    kinds = sorted({op_of[name] for j in kept for name in j["category"].split("-then-") if name in op_of})
    roles = {r["name"]: sorted({op_of[n] for j in kept if j["role"] == r["name"] for n in j["category"].split("-then-")
                                if n in op_of}) for r in results["adapt"]["roles"]}
    return {"jobs": len(kept), "kept_out": len(out), "kinds_of_write": kinds, "writes_by_role": roles,
            "splits": {s: sum(1 for j in kept if j["split"] == s) for s in SPLITS},
            "from_model": sum(1 for j in kept if j.get("origin") == "model")}
