"""Import tau2-bench's airline and retail domains as worlds ``tau2-airline`` and ``tau2-retail``."""

from ._export import DOCUMENTS, state_hash
from ._hash import StateHasher
from ._import import Imported, import_tau2, world_from_record
from ._source import DOMAINS, SourceError, SourceFile, pin
from ._world import build_tau2_world

__all__ = ["DOCUMENTS", "DOMAINS", "Imported", "SourceError", "SourceFile", "StateHasher", "build_tau2_world",
           "import_tau2", "pin", "state_hash", "world_from_record"]
