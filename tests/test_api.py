"""Every package declares its public names in ``__all__``, and every name there exists."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import rehearsal_env


def packages() -> list[str]:
    names = ["rehearsal_env"]
    for info in pkgutil.walk_packages(rehearsal_env.__path__, "rehearsal_env."):
        leaf = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not leaf.startswith("_") and ".worlds." not in info.name:
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", packages())
def test_all_is_complete_and_exists(name: str) -> None:
    module = importlib.import_module(name)
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
