"""A low-tier key's rate limit: the chat client's adaptive concurrency against a fixed one.

    python experiments/benchmarks/bench_rate_limit.py [--requests 60] [--rounds 3] [--out experiments/results/bench_rate_limit]

The endpoint is the tests' fake OpenAI server (tests/fake_openai_server.py, loopback, stdlib) acting
like a hosted API on a low tier: at most ``n`` requests started per ``window`` seconds (beyond that,
HTTP 429 with a ``Retry-After`` saying when the window frees up) and a fixed answer latency. The
client sends ``--requests`` chat requests at ``concurrency=8`` with ``max_retries=3``, the way a
sweep's generator or judge does, two ways:

- ``adaptive``: ragsweep's client as shipped (429s halve the requests in flight and pause new ones
  until their Retry-After; a 429 to a request sent beside others is not one of its retries);
- ``fixed``: the same client with the adaptation switched off (8 in flight whatever happens, every
  429 one of the request's retries, each retried after its own Retry-After) - the client before issue 39.

Reported per scenario (median of interleaved rounds): requests that failed, 429s received, wall
seconds, and requests/s beside the key's limit (n / window). A failed request is a question a sweep
loses (counted, never scored). The machine is shared: the CPU model and the load average are written
beside the numbers; the latencies are the fake's own sleeps, so the load matters little here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from common import cpu_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

SCENARIOS = [  # (requests per window, window seconds, answer latency seconds)
    (2, 0.5, 0.05),
    (5, 1.0, 0.2),
    (10, 1.0, 0.5),
]


class FixedLimit:
    """The adaptation switched off: always the configured concurrency, 429s change nothing."""

    def __init__(self, ceiling: int):
        self.allowed = ceiling
        self.lowest = ceiling

    async def enter(self, st) -> int:  # noqa: ANN001
        return 0

    async def leave(self, st) -> None:  # noqa: ANN001
        pass

    def succeeded(self) -> None:
        pass

    def rate_limited(self, window: int, retry_after) -> None:  # noqa: ANN001
        pass


def run_once(kind: str, n: int, window: float, latency: float, requests: int) -> dict:
    from fake_openai_server import FakeOpenAIServer, ok

    from ragsweep.rag.generator import client as client_mod
    from ragsweep.rag.generator.client import ChatClient, ChatRequest

    reqs = [ChatRequest.user(f"question {i} of a sweep", max_tokens=16) for i in range(requests)]
    paced = client_mod.PACED_429S
    with FakeOpenAIServer(default=ok("An answer.", delay=latency), rate_limit=(n, window), max_requests=100_000,
                          max_seconds=3600) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=8, max_retries=3, backoff_s=0.1, max_backoff_s=10.0)
        if kind == "fixed":
            client.limit = FixedLimit(8)
            client_mod.PACED_429S = 0
        try:
            t0 = time.perf_counter()
            out = client.chat_many(reqs, desc=None)
            seconds = time.perf_counter() - t0
        finally:
            client_mod.PACED_429S = paced
        limited = fake.rate_limited
    failed = sum(1 for r in out if not r.ok)
    return {"failed": failed, "rate_limited": limited, "seconds": seconds,
            "requests_per_s": (requests - failed) / seconds, "lowest_in_flight": client.limit.lowest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_rate_limit"))
    args = ap.parse_args()
    import logging

    logging.getLogger("ragsweep").setLevel(logging.ERROR)
    result = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average_start": os.getloadavg(),
              "requests": args.requests, "rounds": args.rounds, "concurrency": 8, "max_retries": 3, "scenarios": []}
    for n, window, latency in SCENARIOS:
        runs: dict[str, list[dict]] = {"adaptive": [], "fixed": []}
        for _ in range(args.rounds):
            for kind in runs:  # interleaved: a busy moment of the machine falls on both alike
                runs[kind].append(run_once(kind, n, window, latency, args.requests))
        row = {"limit": f"{n} per {window:g} s", "limit_per_s": n / window, "latency_s": latency}
        for kind, rs in runs.items():
            row[kind] = {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
            row[kind]["failed_each_round"] = [r["failed"] for r in rs]
        result["scenarios"].append(row)
        print(json.dumps(row), flush=True)
    result["load_average_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# A rate-limited key: adaptive concurrency against a fixed one", "",
             f"`python experiments/benchmarks/bench_rate_limit.py --requests {args.requests} --rounds {args.rounds}`; "
             f"CPU: {result['cpu']} ({result['cores']} cores, shared: load average "
             f"{result['load_average_start'][0]:.1f} at start, {result['load_average_end'][0]:.1f} at end). "
             f"{args.requests} requests at concurrency 8, max_retries 3, against the fake endpoint limited to n "
             "requests per window (429 + Retry-After beyond); medians of interleaved rounds.", "",
             "| key's limit | latency | client | failed (each round) | 429s | seconds | requests/s (limit) | fewest in flight |",
             "|---|---|---|---|---|---|---|---|"]
    for row in result["scenarios"]:
        for kind in ("adaptive", "fixed"):
            r = row[kind]
            lines.append(f"| {row['limit']} | {row['latency_s']:g} s | {kind} | {r['failed']:g} "
                         f"({', '.join(map(str, r['failed_each_round']))}) | {r['rate_limited']:g} | {r['seconds']:.1f} | "
                         f"{r['requests_per_s']:.2f} ({row['limit_per_s']:g}) | {r['lowest_in_flight']:g} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
