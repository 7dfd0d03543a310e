"""Phase 7, *author* from evidence: jobs made from what the application's writes actually did.

For each write operation, in a seeded order, the resources exploration found (``._explore``) are
tried: its arguments filled from what the application answered (a path parameter from the
resource's own answer, an enum value, a value of a field with the argument's name, else a short
fictional text; where the application fails (5xx) with only the required ones, once more with its
optional text arguments, a comment or a description, filled too; where it refuses (400) naming optional
arguments as the keys of its answer, once more with those filled), the write sent once after a reset,
and its effect read back (``._evidence``).
A write the application refuses, or one that changes nothing, makes no job (it is recorded as
tried). Each job that remains: the request in words, the reference (read the resource, write,
finish), goal checks and scope rules from the diff, the hard rules of the description's policies
(a write that breaks one makes no job either: the next resource is tried), and wrong solutions from the stress layer:
claim done having done nothing, do only the first write (jobs of two writes), and repeat the
write after an unknown outcome (the job injects that fault; the reference retries the operation, the
wrong solution sends the write again), kept only where repeating it ends in another state than the
reference's (for a write the application refuses to repeat, repeating is not wrong). Jobs of two
writes pair two different writes on one resource. Splits come from the job id's hash: the same source
gives the same jobs.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import Check
from ..worlds import World
from ._evidence import diff, goal_checks, hard_rules, scope
from ._explore import Explored, fill_path, resource_of
from ._sandboxed import Runtime

TRIES_PER_WRITE = 48
"""Resources tried per write operation."""
JOBS_PER_WRITE = 5
"""Jobs kept per write operation (and enum value)."""
PAIRS = 8
"""Jobs of two writes."""
TEXTS = ("Thanks, this looks useful.", "Could you add a test for this?", "Please rebase on main.",
         "Let's discuss this at the next sync.", "Following up on this one.")


def split_of(job_id: str) -> str:
    """train (60%), dev (20%) or holdout (20%), from the id's hash."""
    bucket = int(hashlib.sha256(job_id.encode()).hexdigest(), 16) % 10
    return "train" if bucket < 6 else "dev" if bucket < 8 else "holdout"


def _slug(*parts: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(str(p) for p in parts).lower()).strip("-")[:80]


def _field_values(answers: Mapping[str, Any], name: str) -> list[Any]:
    """Scalar values of fields called ``name`` (or, for a list of scalars, ``name``+s) in every answer."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == name and isinstance(v, str | int) and not isinstance(v, bool):
                    found.append(v)
                elif k == name + "s" and isinstance(v, list):
                    found.extend(x for x in v if isinstance(x, str | int) and not isinstance(x, bool))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for key in sorted(answers):
        walk(answers[key])
    return list(dict.fromkeys(found))


def _call(op: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """A call of ``op``; a number given for an argument the tool declares as text is sent as text (a path's
    ``{id}`` that the document types as a string, whose values exploration read as numbers)."""
    texts = {a["name"] for a in op.get("args", ()) if a["type"] == "string"}
    return {"tool": op.get("tool", op["name"]), "args": {k: str(v) if k in texts and isinstance(v, int) and
                                                         not isinstance(v, bool) else v for k, v in args.items()}}


def send(runtime: Runtime, op: Mapping[str, Any], args: Mapping[str, Any], headers: Mapping[str, str],
          key: str) -> tuple[int, Any]:
    """Send ``op`` with ``args`` (path, query and body as the operation declares them) as ``headers`` and the
    operation's own headers, with ``key`` as its idempotency key; (status, decoded answer)."""
    path_args = re.findall(r"\{(\w+)\}", op["path"])
    body = {a["name"]: args[a["name"]] for a in op["args"] if a["in"] == "body" and a["name"] in args}
    query = {a["name"]: args[a["name"]] for a in op["args"] if a["in"] == "query" and a["name"] in args}
    sends_body = op["method"] in ("POST", "PUT", "PATCH")
    return runtime.request(op["method"], fill_path(op["path"], {k: args[k] for k in path_args}),
                           query=query, body=body if sends_body else None,
                           headers={**headers, **op.get("headers", {}), "Idempotency-Key": key})


def named_arguments(op: Mapping[str, Any], answer: Any) -> set[str]:
    """The optional arguments a refusal's JSON object names as its keys (``{"priority": ["This field is
    required."]}``): the application says it needs them where its document does not."""
    if not isinstance(answer, dict):
        return set()
    return {a["name"] for a in op["args"] if not a["required"] and a["name"] in answer}


def _phrase(op: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    summary = op["summary"].rstrip(".")
    text = summary[:1].lower() + summary[1:]
    shown = ", ".join(f"{k} {v!r}" if isinstance(v, str) and " " not in v else f"{k} {v}" if not isinstance(v, str)
                      else f'{k} "{v}"' for k, v in args.items())
    return f"{text} ({shown})"


class Author:
    """Evidence-based jobs on one running world (see the module docstring)."""

    def __init__(self, world: World, runtime: Runtime, ops: Sequence[Mapping[str, Any]],
                 writes: Sequence[Mapping[str, Any]], explored: Explored, headers: Mapping[str, str], seed: int,
                 policy_rules: Sequence[Mapping[str, Any]] = ()) -> None:
        self.world, self.runtime, self.explored, self.headers, self.seed = world, runtime, explored, headers, seed
        self.policy_rules = [dict(r) for r in policy_rules]
        self.reads = {o["path"]: o for o in ops if o["method"] == "GET"}
        self.writes = list(writes)
        """Write tools: an operation with its ``tool`` name, the ``role`` that has it and the ``headers`` it sends."""
        self.tried: list[dict[str, Any]] = []
        self.answers: list[Any] = []
        """The application's answers to the last solution run."""

    def candidates(self, op: Mapping[str, Any], binding: Mapping[str, Any], answer: Any, *,
                   texts: bool = False, needed: frozenset[str] = frozenset(), turn: int = 0) -> list[dict[str, Any]]:
        """Argument sets to try; ``texts``: optional text arguments filled too (after a failure of the server);
        ``needed``: optional arguments filled as if required (a refusal named them); ``turn`` moves the choice of
        fictional texts on (the seed phase's writes, one turn each)."""
        args: dict[str, Any] = {k: binding[k] for k in binding if k in {a["name"] for a in op["args"]}}
        options: list[list[dict[str, Any]]] = [[args]]
        for i, a in enumerate(op["args"]):
            if not a["required"] and texts and a["in"] == "body" and a["type"] == "string" and "enum" not in a \
                    and a["name"] in ("body", "text", "message", "comment", "description"):
                text = TEXTS[(self.seed + i + turn) % len(TEXTS)]
                options = [[{**o, a["name"]: text} for o in group] for group in options]
                continue
            if a["name"] in args or not (a["required"] or a["name"] in needed):
                continue
            if "enum" in a:
                values = list(a["enum"])
            elif a["in"] == "path":
                values = _field_values({"resource": answer}, a["name"])[:3]
            else:
                values = _field_values(self.explored.answers, a["name"])[:4] or \
                    _field_values({"resource": answer}, a["name"])[:4]
                if a["type"] == "string" and (not values or a["name"] in ("body", "text", "message", "comment")):
                    values = [TEXTS[(self.seed + i + len(self.tried) + turn) % len(TEXTS)]]
            if a["type"] == "integer":
                values = [v for v in values if isinstance(v, int)]
            options = [[{**o, a["name"]: v} for o in group for v in values] for group in options]
        return [c for group in options for c in group][:12]

    def _run(self, calls: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> tuple[list[int], Any]:
        self.runtime.reset()
        sent = [send(self.runtime, op, args, self.headers, f"compile-{i}") for i, (op, args) in enumerate(calls)]
        self.answers = [answer for _, answer in sent]
        return [status for status, _ in sent], diff(self.world, self.runtime)

    def broken(self) -> list[str]:
        """The policy rules the database breaks now."""
        out = []
        for r in self.policy_rules:
            check = Check(r["name"], r["sql"], r["op"], r["want"], tuple(r.get("params", ())))
            if not check.compare(self.runtime.check_value(check.sql, check.params)):
                out.append(r["name"])
        return out

    def _job(self, steps: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], resource: str | None,
             binding: Mapping[str, Any], changed: Any, repeat_differs: bool) -> dict[str, Any]:
        read = self.reads.get(resource or "")
        first = [_call(read, binding)] if read else []
        writes = [_call(op, args) for op, args in steps]
        finish = {"tool": "finish", "args": {"message": "Done."}}
        name = "-then-".join(op.get("tool", op["name"]) for op, _ in steps)
        job_id = _slug(name, *binding.values(), *[v for _, a in steps for k, v in a.items() if k not in binding
                                                  and isinstance(v, str) and len(v) <= 20])
        request = "Please " + ", then ".join(_phrase(op, args) for op, args in steps) + "."
        wrong = [{"name": "wrong:claim-done", "calls": [finish]}]
        if len(steps) > 1:
            wrong.append({"name": "wrong:first-step-only", "calls": [*first, writes[0], finish]})
        faults = []
        if repeat_differs:  # the stress layer's unknown outcome on the (last) write; a careful agent retries it
            faults.append({"tool": writes[-1]["tool"], "kind": "unknown_outcome"})
            wrong.append({"name": "wrong:repeat-write", "on_unknown": "repeat", "calls": [*first, *writes, finish]})
        role = str(steps[0][0].get("role", "operator"))
        return {"id": job_id, "split": split_of(job_id), "role": role, "category": name, "request": request,
                "scope": scope(self.world, changed), "goal_checks": goal_checks(self.world, changed),
                "hard_rules": [*self.policy_rules, *hard_rules(self.world, changed)],
                "reference": {"calls": [*first, *writes, finish]},
                "wrong": wrong, "faults": faults, "origin": "evidence", "evidence": {"changed": changed}}

    def jobs(self) -> list[dict[str, Any]]:
        """Every evidence job, in a stable order."""
        out: list[dict[str, Any]] = []
        done: dict[str, list[tuple[str | None, Mapping[str, Any], dict[str, Any]]]] = {}
        for op in self.writes:
            resource = resource_of(self.explored, op["path"])
            bindings = list(self.explored.bindings.get(resource or "", ()))
            random.Random(f"{self.seed}:{op['name']}").shuffle(bindings)  # the same order for every role
            kept: dict[Any, int] = {}
            for binding in bindings[:TRIES_PER_WRITE]:
                answer = self.explored.answers.get(f"GET {fill_path(resource, binding)}") if resource else None
                candidates = self.candidates(op, binding, answer)
                failed, named, k = False, False, 0
                while k < len(candidates):
                    args, k = candidates[k], k + 1
                    variant = tuple(args.get(a["name"]) for a in op["args"] if "enum" in a)
                    if kept.get(variant, 0) >= JOBS_PER_WRITE:
                        continue
                    statuses, changed = self._run([(op, args)])
                    breaks = self.broken()
                    self.tried.append({"tool": op["tool"], "args": args, "status": statuses[0],
                                       "changed": bool(changed), "breaks": breaks})
                    if statuses[0] >= 500 and not failed:  # it failed: once more with its text arguments filled
                        failed = True
                        candidates[k:k] = [c for c in self.candidates(op, binding, answer, texts=True)
                                           if c not in candidates]  # tried next
                    wanted = named_arguments(op, self.answers[0]) if statuses[0] == 400 and not named else set()
                    if wanted:  # it named what it needs: once more with those filled
                        named = True
                        candidates[k:k] = [c for c in self.candidates(op, binding, answer, texts=failed,
                                                                       needed=frozenset(wanted))
                                           if c not in candidates]
                    if not 200 <= statuses[0] < 300 or not changed or breaks:
                        continue
                    _, twice = self._run([(op, args), (op, args)])
                    out.append(self._job([(op, args)], resource, binding, changed, twice != changed))
                    kept[variant] = kept.get(variant, 0) + 1
                    done.setdefault(op["tool"], []).append((resource, binding, args))
                    break
        out += self._pairs(done)
        seen: set[str] = set()
        unique = []
        for job in out:
            if job["id"] not in seen:
                seen.add(job["id"])
                unique.append(job)
        return unique

    def _pairs(self, done: Mapping[str, list[tuple[str | None, Mapping[str, Any], dict[str, Any]]]]
               ) -> list[dict[str, Any]]:
        """Jobs of two writes: each write's first job, then the next write on the same resource."""
        out: list[dict[str, Any]] = []
        ops = [o for o in self.writes if done.get(o["tool"])]
        for i, op in enumerate(ops):
            if len(out) >= PAIRS or len(ops) < 2:
                break
            resource, binding, args = done[op["tool"]][0]
            other = ops[(i + 1) % len(ops)]
            if other.get("role") != op.get("role"):
                continue
            if resource_of(self.explored, other["path"]) != resource:
                continue
            answer = self.explored.answers.get(f"GET {fill_path(resource, binding)}") if resource else None
            for b_args in self.candidates(other, binding, answer)[:4]:
                a, b = (op, args), (other, b_args)
                statuses, changed = self._run([a, b])
                if not all(200 <= s < 300 for s in statuses) or not changed or self.broken():
                    continue
                _, first_only = self._run([a])
                if first_only == changed:
                    continue
                _, twice = self._run([a, b, b])
                out.append(self._job([a, b], resource, binding, changed, twice != changed))
                break
        return out
