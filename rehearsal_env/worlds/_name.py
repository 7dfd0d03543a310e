"""World names: one pattern for every world, whatever registered it.

A world's name becomes part of paths (``world_versions/<world>/``, a served run's
``<world>-<profile>/``), of Gymnasium ids (``rehearsal/<world>-v0``) and of every
record, so it is checked where a name enters: ``register_world``, a folder's
``world.toml``, ``rehearsal world add`` and ``rehearsal import``, and every entry
read back from the state home's registry files.
"""

from __future__ import annotations

import re

WORLD_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
"""A world's name: a lowercase letter, then up to 63 lowercase letters, digits, ``_`` or ``-``."""
WORLD_NAME_RULE = "a lowercase letter, then up to 63 lowercase letters, digits, '_' or '-' (e.g. 'shop', 'tau2-retail')"


def is_world_name(name: object) -> bool:
    """Whether ``name`` is a valid world name (see :data:`WORLD_NAME`)."""
    return isinstance(name, str) and WORLD_NAME.fullmatch(name) is not None


def check_world_name(name: object, where: str = "") -> str:
    """``name`` when it is a valid world name.

    Raises:
        ValueError: saying what was expected and what arrived (shortened, never a whole file).
    """
    if not is_world_name(name):
        shown = repr(name)[:80] + ("..." if len(repr(name)) > 80 else "")
        raise ValueError(f"{where}{': ' if where else ''}expected a world name, {WORLD_NAME_RULE}; got {shown}. "
                         "Rename the world")
    return str(name)
