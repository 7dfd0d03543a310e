"""NeMo Gym / NeMo RL: a world as a resources server (``/seed_session``, ``/<tool>``, ``/verify``).

Quick use (``pip install 'rehearsal-env[nemo-gym]'`` installs the server's parts; NeMo Gym itself needs
Python 3.12 or later and runs beside it)::

    from rehearsal_env.integrations.nemo_gym import dataset_rows, make_app, serve

    rows = dataset_rows("shop", "train")     # NeMo Gym's JSONL rows: responses_create_params, scenario, seed
    serve(make_app("shop", "train", profile="rl", out="runs/nemo-gym"), port=8000)
"""

from ._app import AGENT, COOKIE, DEFAULT_OUT, RESERVED, dataset_rows, make_app, serve

__all__ = ["AGENT", "COOKIE", "DEFAULT_OUT", "RESERVED", "dataset_rows", "make_app", "serve"]
