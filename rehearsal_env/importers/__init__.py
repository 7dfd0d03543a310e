"""Importers: worlds made from someone else's benchmark, read in place from the user's own copy.

Each importer is a subpackage (``rehearsal_env.importers.tau2``); the package itself exports nothing.
"""

__all__: list[str] = []
