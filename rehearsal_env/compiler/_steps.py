"""What each of the nine phases does, on the results of the phases before it (``_compile`` runs them in order).

Every method returns its phase's result (JSON-able); a phase that needs the application starts it again
from the world folder as the phases so far wrote it (``write_world``), so any phase can be resumed alone.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..identity import world_version
from . import _toml
from ._appschema import run_schema_command
from ._author import Author, split_of
from ._errors import CompileError
from ._evidence import app_tables, hard_rules
from ._explore import explore
from ._gate import validate_all
from ._model import PROMPT_VERSION, CompilerModel, ModelConfig, prompt_hashes
from ._openapi import operations, parse_document, tool_of
from ._package import package
from ._phases import PhaseStore, sha
from ._sandboxed import Runtime, plan_runtime, start_runtime
from ._seedapi import seed_through_api
from ._source import inspect_source, resolve
from ._worldfolder import WORLD_DIR, copy_sources, load, seed_sql, world_toml

SCHEMA_FILE = "schema-from-app.sql"
"""The schema read back from the application's own database ([schema.from_app]), in the compile folder."""


class PhaseWork:
    """The work of each phase for one compile (see the module docstring)."""

    def __init__(self, source: Path, out: Path, describe: Path | None, model: ModelConfig | None,
                 repairs: int, runtime: str | None = None) -> None:
        self.source, self.out, self.describe, self.model, self.repairs = source, out, describe, model, repairs
        self.runtime_choice = runtime
        """Where the application runs, given to the compile (None: as the description says)."""
        self.store = PhaseStore(out)
        self.world_dir = out / WORLD_DIR
        self.results: dict[str, Any] = {}

    # -- the world folder as the phases so far describe it ------------------------------
    def write_world(self, *, seeded: bool, adapted: bool, refused: frozenset[str] = frozenset(),
                    name: str | None = None) -> None:
        """world.toml as the phases so far describe it; ``refused``: write tools left out (see :meth:`package`);
        ``name``: the world's name at a stage of its own (see ``world_toml``)."""
        r = self.results
        self.world_dir.mkdir(parents=True, exist_ok=True)
        migrations = copy_sources(r["inspect"], self.world_dir, "materialize")
        tools = [t for t in r["adapt"]["tools"] if t["name"] not in refused] if adapted else ()
        roles = [{**role, "tools": [t for t in role["tools"] if t not in refused]}
                 for role in r["adapt"]["roles"]] if adapted else ()
        policies = r["adapt"]["policies"] if adapted else ()
        write_atomic(self.world_dir / "world.toml", world_toml(r["inspect"], migrations, seeded=seeded, tools=tools,
                                                               roles=roles, policies=policies, name=name))

    def runtime(self, phase: str, *, verify_reset: bool = True) -> Runtime:
        """The application of the world folder as written so far, started where the plan says."""
        return start_runtime(load(self.world_dir, phase), self.world_dir, self.results["plan"], phase,
                             verify_reset=verify_reset)

    # -- the phases ------------------------------------------------------------------------
    def inspect(self) -> dict[str, Any]:
        result = inspect_source(self.source, self.describe)
        app = result["application"]
        folder = resolve(result, {"name": app["folder"], "root": app["root"]}, folder=True)
        if self.out.resolve().is_relative_to(folder):
            raise CompileError("inspect", f"expected --out outside the application's folder {folder}; got "
                               f"{self.out}. Fix: write the compile elsewhere (its copy would become the application)")
        spec = result["schema_from_app"]
        if spec is not None:  # its migrations are code: run them on SQLite, read the tables back
            text, kept, kept_out = run_schema_command(spec["command"], spec["env"],
                                                      {"python": sys.executable, "app": str(folder)}, spec["exclude"])
            write_atomic(self.store.dir / SCHEMA_FILE, text)
            result["compile_dir"] = str(self.store.dir.resolve())
            result["migrations"] = [{"name": SCHEMA_FILE, "root": "compile", "sha256": sha(text)}]
            result["schema_from_app"] = {**spec, "tables": kept, "kept_out": kept_out}
        return result

    def plan(self) -> dict[str, Any]:
        app = self.results["inspect"]["application"]
        runtime, why = plan_runtime(self.runtime_choice or app.get("runtime", "auto"))
        return {"runtime": runtime, "why": why,
                "local": {"command": app["command"], "env": app["env"], "start_timeout_s": app["start_timeout_s"]},
                "health": app["health"], "probe": app["probe"], "port": app["port"], "reset_hook": app["reset_hook"]}

    def materialize(self) -> dict[str, Any]:
        self.write_world(seeded=False, adapted=False)
        world = load(self.world_dir, "materialize")
        with self.runtime("materialize") as rt:
            status, _ = rt.request("GET", rt.spec.health, query={}, body=None, headers={})
            return {"world_folder": WORLD_DIR, "tables": [t.name for t in app_tables(world)],
                    "empty_digest": rt.first_digest, "health": f"{status} at {rt.spec.health}"}

    def discover(self) -> dict[str, Any]:
        self.write_world(seeded=False, adapted=False)
        inspected = self.results["inspect"]
        with self.runtime("discover") as rt:
            if inspected["openapi"] is None:
                raise CompileError("discover", "expected an OpenAPI document ([openapi] file or served, or "
                                   "openapi.json in SOURCE); found none. Fix: describe the application's operations")
            if "file" in inspected["openapi"]:
                text = resolve(inspected, inspected["openapi"]["file"]).read_text(errors="replace")
            else:
                status, data = rt.request("GET", inspected["openapi"]["served"], query={}, body=None, headers={})
                if status != 200:
                    raise CompileError("discover", f"expected the OpenAPI document at "
                                       f"{inspected['openapi']['served']} (200); the application answered {status}")
                text = json.dumps(data)
            ops = operations(parse_document(text))
            schema: dict[str, list[dict[str, Any]]] = {}
            for table in self.results["materialize"]["tables"]:
                rows = rt.query("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                                "WHERE table_name = ? AND table_schema = current_schema() ORDER BY ordinal_position",
                                (table,))
                schema[table] = [{"column": c, "type": t, "nullable": n == "YES"} for c, t, n in rows]
            if not any(schema.values()):
                raise CompileError("discover", "expected the application's tables in its database; none could be "
                                   "read. Fix: give its migrations under [schema] sql")
        return {"operations": ops, "schema": schema}

    def seed(self) -> dict[str, Any]:
        inspected = self.results["inspect"]
        data, api = inspected["data"], int(inspected.get("data_api", 0))
        if data is None and not api:
            raise CompileError("seed", "expected fictional data: [data] generator, sql or api (writes sent through "
                               "the application's API) in the description; found none. Fix: give one")
        stage = self.store.dir / "seedgen"
        stage.mkdir(parents=True, exist_ok=True)
        migrations = copy_sources(inspected, stage, "seed")
        top = _toml.top({"name": "seedgen", "data_anchor": _date(inspected), "seed": inspected["seed"]}) + \
            _toml.table("schema", {"sql": migrations})
        if data is not None:
            name = "data.py" if data["kind"] == "generator" else "seed.sql"
            write_atomic(stage / name, resolve(inspected, data).read_bytes())
            top += _toml.table("data", {data["kind"]: name})
        write_atomic(stage / "world.toml", top)
        world = load(stage, "seed")
        try:
            rows = world.seed_rows()
        except (ValueError, OSError, RuntimeError) as exc:
            raise CompileError("seed", f"expected the data generator to give rows; it failed: "
                               f"{str(exc).splitlines()[0][:300]}") from None
        text = seed_sql(world, rows)
        write_atomic(self.world_dir / "seed.sql", text)
        result: dict[str, Any] = {"from": data["kind"] if data is not None else "api",
                                  "rows": {t.name: len(rows.get(t.name, ())) for t in app_tables(world)}}
        if api:  # then writes through the application's own API, on those rows; what they made is the seed
            self.write_world(seeded=True, adapted=False, name=f"seeding-{sha(text)[:8]}-{inspected['name']}"[:63])
            staged = load(self.world_dir, "seed")
            with self.runtime("seed") as rt:
                seeded, made = seed_through_api(staged, rt, self.results["discover"]["operations"],
                                                inspected["actors"], int(inspected["seed"]), api,
                                                [r for p in inspected["policies"] for r in p["rules"]])
            if not seeded.kept:
                raise CompileError("seed", f"expected the application to accept some of the {api} writes that [data] "
                                   f"api asks for; it kept none of the {seeded.sent} sent (not kept: "
                                   f"{seeded.refused or 'none'}; undone for a policy: {seeded.undone or 'none'}). Fix: "
                                   "seed the records its writes need with [data] generator or sql")
            text = seed_sql(world, made)
            write_atomic(self.world_dir / "seed.sql", text)
            result["api"] = seeded.result()
            result["rows_before_api"], result["rows"] = result["rows"], {t.name: len(made.get(t.name, ()))
                                                                         for t in app_tables(world)}
        return {**result, "seed_sql_sha256": sha(text)}

    def adapt(self) -> dict[str, Any]:
        ops = self.results["discover"]["operations"]
        actors = self.results["inspect"]["actors"]
        reads = [tool_of(op) for op in ops if op["method"] == "GET"]
        tools, roles, writes = list(reads), [], []
        for i, actor in enumerate(actors):
            mine = []
            for op in (o for o in ops if o["method"] != "GET"):
                tool = tool_of(op)
                if i:
                    tool["name"] = f"{actor['role']}_{op['name']}"[:64]
                    tool["headers"] = actor["headers"]
                tools.append(tool)
                mine.append(tool["name"])
                writes.append({"op": op["name"], "tool": tool["name"], "role": actor["role"],
                               "headers": actor["headers"]})
            acting = ", ".join(f"{k}: {v}" for k, v in actor["headers"].items()) or "no identity header"
            roles.append({"name": actor["role"], "tools": [t["name"] for t in reads] + mine,
                          "description": actor["description"] or f"Calls the application's operations ({acting})."})
        policies = [{"text": p["text"], "hard_rules": [r["name"] for r in p["rules"]]}
                    for p in self.results["inspect"]["policies"]]
        rules = [r for p in self.results["inspect"]["policies"] for r in p["rules"]]
        return {"tools": tools, "roles": roles, "writes": writes, "policies": policies, "policy_rules": rules,
                "kinds": {t["name"]: t["kind"] for t in tools}}

    def author(self) -> dict[str, Any]:
        self.write_world(seeded=True, adapted=True)
        world = load(self.world_dir, "author")
        ops = self.results["discover"]["operations"]
        # reads go as the world sends them: with [http] headers, which world.toml makes the first actor's
        headers = self.results["inspect"]["actors"][0]["headers"]
        seed = int(self.results["inspect"]["seed"])
        with self.runtime("author", verify_reset=False) as rt:
            explored = explore(rt, [o for o in ops if o["method"] == "GET"], headers)
            by_op = {o["name"]: o for o in ops}
            writes = [{**by_op[w["op"]], **w} for w in self.results["adapt"]["writes"]]
            author = Author(world, rt, ops, writes, explored, headers, seed, self.results["adapt"]["policy_rules"])
            jobs = author.jobs()
            model_info: dict[str, Any] | None = None
            if self.model is not None:
                client = CompilerModel(self.model)
                role = self.results["adapt"]["roles"][0]["name"]
                proposed = client.propose({"tools": self.results["adapt"]["tools"], "role": role,
                                           "tables": self.results["discover"]["schema"]}, jobs)
                by_name = {w["tool"]: w for w in writes}
                for job in proposed:
                    job.setdefault("role", role)
                    job.setdefault("category", "model")
                    job["split"] = split_of(str(job.get("id")))
                    calls = (job.get("reference") or {}).get("calls") or []
                    steps = [(by_name[c["tool"]], c.get("args") or {}) for c in calls if isinstance(c, dict)
                             and c.get("tool") in by_name]
                    if steps and all(isinstance(a, dict) for _, a in steps):
                        try:
                            _, changed = author._run(steps)
                        except (KeyError, TypeError):
                            changed = {}
                        job.setdefault("hard_rules", [*self.results["adapt"]["policy_rules"],
                                                      *hard_rules(world, changed)])
                    job["wrong"] = [*(job.get("wrong") or []), {"name": "wrong:claim-done", "calls": [
                        {"tool": "finish", "args": {"message": "Done."}}]}]
                jobs += proposed
                model_info = {"model": self.model.model, "base_url": self.model.base_url, "seed": self.model.seed,
                              "prompt_version": PROMPT_VERSION, "prompt_sha256": prompt_hashes(),
                              "response_format": self.model.response_format, "proposed": len(proposed)}
        return {"jobs": jobs, "tried": author.tried, "exploration_requests": explored.requests,
                "explored": {k: len(v) for k, v in explored.bindings.items()}, "model": model_info}

    def validate(self) -> dict[str, Any]:
        self.write_world(seeded=True, adapted=True)
        world = load(self.world_dir, "validate")
        path_args = {t["name"]: re.findall(r"\{(\w+)\}", t["path"]) for t in self.results["adapt"]["tools"]}
        jobs = self.results["author"]["jobs"]
        with self.runtime("validate") as rt:
            client = CompilerModel(self.model) if self.model is not None else None
            result = validate_all(world, jobs, rt, path_args, repair=client.repair if client else None,
                                  repairs=self.repairs)
        return result

    def package(self) -> dict[str, Any]:
        """The world folder as published: a role keeps a write only if the application did not refuse it to the
        role's identity (401 or 403) every time it was tried: the role's permissions, by evidence."""
        statuses: dict[str, set[int]] = {}
        for t in self.results["author"]["tried"]:
            statuses.setdefault(t["tool"], set()).add(int(t["status"]))
        used = {c["tool"] for j in self.results["validate"]["kept"]
                for solution in (j["reference"], *j.get("wrong", [])) for c in solution["calls"]}
        refused = frozenset(name for name, seen in statuses.items() if seen <= {401, 403} and name not in used)
        self.write_world(seeded=True, adapted=True, refused=refused)
        result = package(self.world_dir, self.results)
        world = load(self.world_dir, "package")
        return {**result, "refused_writes": sorted(refused), "world_version": world_version(world),
                "world_folder": WORLD_DIR}


def _date(inspected: dict[str, Any]) -> Any:
    from datetime import date

    return date.fromisoformat(inspected["data_anchor"])
