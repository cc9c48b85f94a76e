"""What serves the OpenAI-compatible API, one small module per responsibility:

- ``process``: ports, pids, process groups, the pid-file registry (``find_orphans``,
  ``stop_orphans``), the stop of live servers at exit and on SIGINT/SIGTERM/SIGHUP;
- ``managed``: ``ManagedServer``, a server process this process owns (start, health, stop,
  and why it died);
- ``llamacpp`` (CPU default), ``vllm`` (GPU): the managed servers Hydra builds;
- ``gpu``: how the vLLM servers of one GPU share its memory (``gpu_memory_utilization``);
- ``defaults``: the client settings (concurrency, timeout) that go with each kind of server;
- ``external``: any OpenAI-compatible endpoint, no process;
- ``errors``: the ``ServerError`` family.

Import from ``ragsweep.rag.generator.server``, the stable path (configs name
``ragsweep.rag.generator.server.LlamaCppServer`` etc. in ``_target_``); these modules may move.
"""
