"""Registered agent profiles, and the references that name them.

Registering a profile (:meth:`ProfileStore.register`, ``rehearsal profile add FILE``)
stores it as ``ROOT/NAME/vN.toml``. The same content again returns the version it
already has; a changed profile under an existing name becomes the next version.
Stored versions never change. ``ROOT`` is ``$REHEARSAL_AGENT_PROFILES``, else
``agent_profiles/`` in the state home (``$REHEARSAL_HOME``, else ``~/.rehearsal``; see
:mod:`rehearsal_env._home`), like ``world_versions/``.

A reference names a profile: ``NAME`` (its latest version) or ``NAME@vN``. The
built-in scripted agents (``reference``, ``null``, ``wrong:<name>``) have built-in
profiles (:func:`~._profile.builtin_profile`) and are never stored.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from filelock import FileLock

from .._atomic import write_atomic
from .._home import agent_profiles
from ._profile import AgentProfile, builtin_profile, is_builtin, model_profile
from ._profile_file import parse_profile

_REF = re.compile(r"^(?P<name>.+?)@v(?P<version>[0-9]+)$")
"""A reference to a version: ``NAME@vN``."""


class ProfileStore:
    """Registered profiles under ``root``: ``root/NAME/vN.toml``, never rewritten."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else agent_profiles()  # $REHEARSAL_AGENT_PROFILES, else in the state home

    def _dir(self, name: str) -> Path:
        return self.root / name.replace(":", "_")

    def register(self, profile: AgentProfile) -> tuple[AgentProfile, bool]:
        """Store ``profile``; return (the stored version, True) or (the existing version, False) when
        its latest version already has the same content.

        Raises:
            ValueError: a built-in agent's profile (they are not stored).
        """
        if is_builtin(profile.agent) and profile.name == profile.agent:
            raise ValueError(f"{profile.name!r} is a built-in agent's profile and is not registered; "
                             "give the profile another name")
        folder = self._dir(profile.name)
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / ".lock")):
            versions = self.versions(profile.name)
            unversioned = replace(profile, version=None)
            if versions and replace(versions[-1], version=None) == unversioned:
                return versions[-1], False
            stored = replace(profile, version=len(versions) + 1)
            path = folder / f"v{stored.version}.toml"
            write_atomic(path, stored.to_toml())
            return stored, True

    def versions(self, name: str) -> list[AgentProfile]:
        """Every stored version of ``name``, oldest first (empty when none)."""
        folder = self._dir(name)
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("v*.toml"):
            if re.fullmatch(r"v[0-9]+", path.stem):
                found.append(parse_profile(path.read_text(), str(path)))
        return sorted(found, key=lambda p: p.version or 0)

    def names(self) -> list[str]:
        """The names of every registered profile, sorted."""
        if not self.root.is_dir():
            return []
        out = []
        for folder in self.root.iterdir():
            versions = self.versions(folder.name) if folder.is_dir() else []
            if versions:
                out.append(versions[-1].name)
        return sorted(out)

    def get(self, ref: str) -> AgentProfile:
        """The profile a reference names: ``NAME`` (latest version) or ``NAME@vN``.

        Raises:
            KeyError: no such profile or version, naming what is registered.
        """
        match = _REF.match(ref)
        name, wanted = (match["name"], int(match["version"])) if match else (ref, None)
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none"
            raise KeyError(f"no agent profile {name!r} in {self.root}; registered: {known}. "
                           "Register one with `rehearsal profile add FILE.toml`")
        if wanted is None:
            return versions[-1]
        for p in versions:
            if p.version == wanted:
                return p
        raise KeyError(f"agent profile {name!r} has versions v1..v{len(versions)}, not v{wanted}")


def resolve_agent(spec: str, store: ProfileStore | None = None) -> AgentProfile:
    """The profile an ``--agent`` value names: a built-in agent, ``openai:MODEL`` or a registered ``NAME[@vN]``."""
    if is_builtin(spec):
        return builtin_profile(spec)
    if spec.startswith("openai:"):
        model = spec.removeprefix("openai:")
        if not model:
            raise ValueError("expected --agent openai:MODEL with a model name, got 'openai:'")
        return model_profile(model)
    try:
        return (store or ProfileStore()).get(spec)
    except KeyError as exc:
        raise KeyError(f"unknown agent {spec!r}: not a built-in agent (reference, null, wrong:<name>), not "
                       f"openai:MODEL, and not a registered profile ({exc.args[0]})") from None
