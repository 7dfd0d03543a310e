"""Every package declares its public names in ``__all__``, and every name there exists.

A package that needs an optional extra (``integrations.openenv`` needs ``openenv-core``, ...) is
skipped, saying which extra installs it, when that extra is not installed; with the extra's
``REHEARSAL_REQUIRE_<PART>=1`` (as ``.ci/run`` sets) that is a failure instead.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import rehearsal_env

RETIRED = {"rehearsal_env.integrations.verifiers"}
"""Packages kept only to say, on import, what replaced them (tests/test_verifiers.py checks what they say)."""


def packages() -> list[str]:
    names = ["rehearsal_env"]
    for info in pkgutil.walk_packages(rehearsal_env.__path__, "rehearsal_env."):
        leaf = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not leaf.startswith("_") and ".worlds." not in info.name and info.name not in RETIRED:
            names.append(info.name)
    return names


EXTRAS = {"openenv": "openenv", "verifiers": "verifiers", "trl": "trl", "transformers": "trl", "datasets": "trl",
          "mcp": "mcp", "atif": "atif", "llama_cpp": "live", "skyrl_gym": "skyrl", "tinker_cookbook": "tinker",
          "tinker": "tinker", "verl": "verl"}
"""Top-level modules that only an extra installs, and that extra."""
REQUIRE: dict[str, str] = {"live": "LIVE_MODEL"}
"""The ``REHEARSAL_REQUIRE_<PART>`` of an extra whose part is not named as the extra is."""


def import_or_skip(name: str) -> types.ModuleType:
    """Import a package; skip (or fail under ``REHEARSAL_REQUIRE_<EXTRA>=1``) when an extra it needs is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # ModuleNotFoundError, or the harness's SdkMissing (name "mcp")
        missing = exc.name or ""
        top = missing.split(".")[0]
        extra = EXTRAS.get(missing) or EXTRAS.get(top)
        if extra is None:
            raise  # a core dependency missing, or a module of ours: a real failure
        why = f"{name} needs the {extra} extra ({top} is not installed): pip install -e '.[{extra}]'"
        require = f"REHEARSAL_REQUIRE_{REQUIRE.get(extra, extra.upper())}"
        if os.environ.get(require) == "1":
            pytest.fail(f"{require}=1 but {why}")
        pytest.skip(why)


@pytest.mark.parametrize("name", packages())
def test_all_is_complete_and_exists(name: str) -> None:
    module = import_or_skip(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    for public in module.__all__:
        assert hasattr(module, public), f"{name}.__all__ names {public!r}, which does not exist"
    defined = {
        n for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
        and (getattr(v, "__module__", "") or "").startswith(name)
        and (inspect.isclass(v) or inspect.isfunction(v))
    }
    missing = defined - set(module.__all__)
    assert not missing, f"{name} exposes {sorted(missing)} but does not list them in __all__"


def test_make_takes_a_full_id_with_or_without_world() -> None:
    for kwargs in ({}, {"world": None}, {"world": "analytics"}):
        env = rehearsal_env.make("analytics/orders-count-0001", **kwargs)
        assert (env.world.name, env.scenario.id) == ("analytics", "orders-count-0001")
    assert rehearsal_env.make("orders-count-0001", world="analytics").scenario.id == "orders-count-0001"
    with pytest.raises(ValueError, match="names world 'analytics', but world='shop'"):
        rehearsal_env.make("analytics/orders-count-0001", world="shop")


def test_import_reads_no_state_and_loads_no_native_library(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        seen = []
        def hook(event, args):
            if (event == "open" and str(args[0]).startswith({str(tmp_path)!r})
                    or event == "ctypes.dlopen" and args[0] is not None):  # ctypes' own import opens None
                seen.append((event, str(args[0]) if args else ""))
        sys.addaudithook(hook)
        import rehearsal_env
        import gymnasium
        assert "rehearsal/shop-v0" in gymnasium.registry
        print(seen)
    """)
    (tmp_path / "worlds.json").write_text("{}")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "REHEARSAL_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import rehearsal_env touched: {done.stdout.strip()}"
