"""An episode's whole in-memory state as JSON-able values, and an episode rebuilt from it.

Besides the database (:mod:`._delta`), an episode is: its turn and trace, the
journal of operations (the retry contract), what the events layer has decided
(the change of request, the stress layer's refusal and repeat, fault numbering,
messages not yet delivered), the customer's memory, and the counters behind the
run metrics. :func:`episode_state` reads all of it from a running episode;
:func:`load_episode_state` writes it into a fresh :class:`~._episode.Episode` of
the same scenario, so the two continue identically. A fork and a checkpoint go
through this one path (a fork never serializes to bytes, but copies the same values),
so they never share a mutable object with the episode they came from.

Tool arguments and results pass through JSON (a tuple comes back a list; a value
JSON cannot hold comes back as its text, as every observation already shows it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, fields, is_dataclass
from typing import Any

import numpy as np

from ._customer import Customer
from ._episode import Episode, TurnRecord
from ._journal import Operation
from ._lineage import Lineage
from ._metrics import Counters

_SEEDS = np.random.SeedSequence(0)
STATE_VERSION = 1
"""Version of the state layout inside a checkpoint (bumped whenever a field changes meaning)."""


class NotForkable(TypeError):
    """Part of the episode (its customer) cannot be copied or saved."""


def _plain(value: Any) -> Any:
    """A JSON-able deep copy (tuples become lists; other values their text, as observations show them)."""
    return json.loads(json.dumps(value, default=str))


_RECORD = "__record__"


_PLAIN = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, tuple[str, ...]]] = {}
"""Per record type: its saved name and its fields' names (looked up once per type)."""


def _encode(value: Any) -> Any:
    """A JSON-able form of a trace value: frozen records of this package (a tool crash) keep their type."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    known = _FIELDS.get(kind)
    if known is None and is_dataclass(value) and not isinstance(value, type):
        known = _FIELDS[kind] = (f"{kind.__module__}:{kind.__qualname__}", tuple(f.name for f in fields(value)))
    if known is not None:
        return {_RECORD: known[0], "fields": {name: _encode(getattr(value, name)) for name in known[1]}}
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    """:func:`_encode` undone; only record types of ``rehearsal_env.env`` already loaded are built (no import)."""
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict) and _RECORD in value:
        module, _, name = str(value[_RECORD]).partition(":")
        kind = getattr(sys.modules.get(module), name, None) if module.startswith(__package__ + ".") else None
        if not (isinstance(kind, type) and is_dataclass(kind)):
            raise ValueError(f"the saved trace holds a {value[_RECORD]!r}; expected a record type of "
                             f"{__package__}")
        return kind(**{k: _decode(v) for k, v in value["fields"].items()})
    return value


def customer_state(customer: Customer) -> tuple[str, dict[str, Any]]:
    """The customer's class and memory; :class:`NotForkable` when it keeps no account of it."""
    save = getattr(customer, "customer_state", None)
    if save is None:
        raise NotForkable(f"the episode's customer ({type(customer).__qualname__}) cannot be forked or saved: "
                          "it has no customer_state()/load_customer_state() methods; give it both (see "
                          "rehearsal_env.env.ScriptedCustomer) or use the scripted customer")
    return type(customer).__qualname__, _plain(save())


def episode_state(episode: Episode) -> dict[str, Any]:
    """Everything of ``episode`` but its database and verdict (it has not ended), as JSON-able values."""
    kind, memory = customer_state(episode.customer)
    counters = episode._n  # the episode's own counters (the env package's private state)
    return {
        "turn": episode.turn,
        "dispatch_turn": episode._calls.turn,
        "trace": [_encode(t) for t in episode.trace],
        "crashes": _encode(list(getattr(episode._calls, "crashes", ()))),
        "counters": dict(vars(counters)),
        "journal": [{"id": op.id, "tool": op.tool.name, "args": _plain(dict(op.args)), "state": op.state,
                     "result": _plain(op.result)} for op in episode.journal.operations()],
        "events": _plain(episode.events.state()),
        "customer": {"kind": kind, "state": memory},
        "episode_id": episode.id,
        "lineage": None if episode.lineage is None else asdict(episode.lineage),
        "turn_rewards": list(episode.turn_rewards),
    }


def load_episode_state(episode: Episode, state: Mapping[str, Any]) -> None:
    """Put ``state`` (from :func:`episode_state`) into ``episode``, just made and not started.

    Raises:
        NotForkable: the episode's customer is of another kind than the saved one, or cannot load state.
        KeyError: the journal names a tool this scenario's role does not have.
    """
    customer = state["customer"]
    load = getattr(episode.customer, "load_customer_state", None)
    if load is None or type(episode.customer).__qualname__ != customer["kind"]:
        raise NotForkable(f"the saved episode's customer was a {customer['kind']}; this episode's is a "
                          f"{type(episode.customer).__qualname__}"
                          f"{'' if load else ' without load_customer_state()'}: pass a customer of the same kind")
    load(customer["state"])
    episode.turn = int(state["turn"])
    episode._calls.turn = int(state["dispatch_turn"])
    episode.trace[:] = [_decode(t) for t in state["trace"]]
    episode.turn_rewards[:] = [float(r) for r in state.get("turn_rewards", ())]  # absent from older checkpoints
    if any(not isinstance(t, TurnRecord) for t in episode.trace):
        raise ValueError("the saved trace holds something other than turn records")
    crashes = getattr(episode._calls, "crashes", None)
    if crashes is not None:
        crashes[:] = _decode(state["crashes"])
    fresh = Counters(**state["counters"])
    for name, value in vars(fresh).items():
        setattr(episode._n, name, value)  # the dispatcher holds the same Counters object
    tools = {**{t.name: t for t in episode.world.tools}, **episode.tools}
    for op in state["journal"]:
        if op["tool"] not in tools:
            raise KeyError(f"the saved journal names tool {op['tool']!r}, which world {episode.world.name!r} "
                           f"does not have (expected one of {', '.join(sorted(tools))})")
        episode.journal.record(Operation(op["id"], tools[op["tool"]], op["args"], op["state"], op["result"]))
    episode.events.load_state(state["events"])
    episode.id = state["episode_id"]
    lineage = state["lineage"]
    episode.lineage = None if lineage is None else Lineage(**lineage)


def rng_state(rng: np.random.Generator | None, seed: int | None) -> dict[str, Any] | None:
    """The env's random generator's state (None: it was never used or seeded)."""
    if rng is None:
        return None
    return {"bit_generator": _plain(rng.bit_generator.state), "seed": seed}


def copy_rng(rng: np.random.Generator | None) -> np.random.Generator | None:
    """An independent generator in ``rng``'s state."""
    if rng is None:
        return None
    bits = type(rng.bit_generator)(_SEEDS)
    bits.state = rng.bit_generator.state
    return np.random.Generator(bits)


def set_rng_state(state: Mapping[str, Any] | None) -> tuple[np.random.Generator | None, int | None]:
    """A generator in the state :func:`rng_state` saved, and the seed it came from."""
    if state is None:
        return None, None
    saved = state["bit_generator"]
    kind = getattr(np.random, str(saved.get("bit_generator")), None)
    if kind is None or not isinstance(kind, type) or not issubclass(kind, np.random.BitGenerator):
        raise ValueError(f"the saved random state names bit generator {saved.get('bit_generator')!r}; expected one "
                         "of numpy's (PCG64, ...)")
    bits = kind(_SEEDS)  # any seed: the state is overwritten (a shared SeedSequence is the cheapest start)
    bits.state = saved
    seed = state["seed"]
    return np.random.Generator(bits), None if seed is None else int(seed)
