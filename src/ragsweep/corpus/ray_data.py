"""The Ray Data session that ``chunker.engine=ray`` and ``retriever.engine=ray`` share.

Both run Ray Data ``map_batches`` over the corpus and need the same things before it: a Ray
connection (``address``: None = a local instance, ``"auto"`` or ``HOST:PORT`` = a running cluster),
results handed back in input order (chunk and embedding files are written in corpus order), and
Ray's own progress bars off (ragsweep shows its own)."""

from __future__ import annotations

from typing import Any

#: where chunking / dense encoding run
ENGINES = ("local", "ray")


def session(address: str | None) -> Any:
    """Ray connected (joined once per process) and its Data context set up; returns ``ray``."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    return ray
