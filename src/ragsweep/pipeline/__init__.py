"""Running RAG systems: one job as named stages, sweeps of them, and the commands.

- :mod:`ragsweep.pipeline.stages`: the stages of one job (load, chunk, index, retrieve, generate, judge, log).
- :mod:`ragsweep.pipeline.system`: :func:`run_system`, one RAG system from its Hydra config.
- :mod:`ragsweep.pipeline.retrieval_only`: the retrieval-only composition (``generator=none``).
- :mod:`ragsweep.pipeline.sweep`: what a multirun shares (one server, the parent run, the degenerate check).
- :mod:`ragsweep.pipeline.cli`: the ``ragsweep`` command; :mod:`ragsweep.pipeline.doctor`: ``ragsweep-doctor``.
- :mod:`ragsweep.pipeline.config`: config validation against each group's schema.
- :mod:`ragsweep.pipeline.summary`: progress bars and the summary a person reads.
"""


def __getattr__(name: str):  # noqa: ANN202 - ragsweep 0.1's ``ragsweep.pipeline`` module was today's system.py
    if name == "run_system":
        import warnings

        warnings.warn("ragsweep.pipeline.run_system moved to ragsweep.pipeline.system.run_system (or use "
                      "ragsweep.run); the old path works until ragsweep 0.3", FutureWarning, stacklevel=2)
        from ragsweep.pipeline.system import run_system

        return run_system
    raise AttributeError(f"module 'ragsweep.pipeline' has no attribute {name!r}")
