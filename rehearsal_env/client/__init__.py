"""The Python client of ``rehearsal serve``: :class:`Client` (one method per endpoint) and
:class:`RemoteEnv` (a Gymnasium env whose episodes run on the server).

::

    from rehearsal_env.client import RemoteEnv
    env = RemoteEnv("http://127.0.0.1:8000", "shop/refund-item-0001", key="rk_...")
    observation, info = env.reset(seed=0)
"""

from ._client import ApiError, AtCapacity, Client, StepConflict
from ._remote import RemoteEnv
from ._ws import WebSocketSession

__all__ = ["ApiError", "AtCapacity", "Client", "RemoteEnv", "StepConflict", "WebSocketSession"]
