"""The time ``ragsweep-reproduce`` says is left: each planned sweep's estimate and the measured
rescale (:mod:`ragsweep.pipeline.reproduce` plans and runs the sweeps).

A retrieval-only sweep costs a flat rate per system and question (measured on the finished ones,
else :data:`PRIOR_S`). A generating sweep is estimated system by system from the context each reads
(:func:`contexts_of`: ``retriever.top_k * chunker.size`` tokens, none for ``prompt=no_context``):
:data:`GEN_A_S` + :data:`GEN_B_S` per 1,000 context tokens per question, rescaled by measured /
predicted over the generating sweeps that finished (:func:`gen_scale`); a sweep whose systems cannot
be told that way (an unknown config, a value that is no number) gets the flat rate of its side.

Answers already in the cache cost nothing: before a generating sweep runs, :func:`cached_answers`
counts, system by system, the questions whose generation request is in the shared cache (the
requests built as ``sweep.dry_run`` builds them: chunking, index and retrieval, no model call), and
only the others are estimated; a cached answer costs :data:`CACHED_S` (it is still judged and
logged). A cache that holds no answer at all is not read question by question.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

#: seconds per system and question before any sweep of that side was measured (2 cores: the
#: retrieval-only top-k sweep, 6 systems x 300 questions in 101.6 s; the 20-question top-k sweep,
#: 6 x 20 in 13.0 min; experiments/results/diagnoses.md)
PRIOR_S = {"retrieval": 0.06, "generation": 6.5}
#: a generating system's seconds per question: GEN_A_S + GEN_B_S * (its context tokens / 1000); its
#: context is ``retriever.top_k * chunker.size`` tokens (capped at ``generator.server.n_ctx``, which
#: the prompt's ``fit: drop_lowest`` keeps it under), 0 for ``prompt=no_context``. Fitted on the
#: 20-question sweeps of experiments/results/diagnoses.md (2 cores, 2 llama-server replicas, SmolLM2
#: Q4_1, AMX code, offline judge; :data:`FIT_SWEEPS`, :func:`fit_b`): least squares over the three
#: with both free gives a = -6.3 s (a is not told apart by sweeps that all run 6 systems, 3 of them
#: the closed-book floor), so a is the floor's measured cost, 7 s for 6 closed-book answers
#: (experiments/results/cpu_speed.md, the 6-question top-k sweep), and b is then least squares over
#: the three: 4.42 s per 1,000 tokens. They predict 17.8 / 27.7 / 28.9 min against the measured
#: 13.0 / 26.0 / 33.3. The context is an upper bound where the chunks are shorter than chunker.size
#: (short passages): the rescale after the first finished sweep corrects for that.
GEN_A_S = 7.0 / 6
GEN_B_S = 4.42
#: the fit's data: (name, systems' context tokens, questions, measured wall seconds)
FIT_SWEEPS = (
    ("ragchecker_topk", (1500, 3000, 6000, 0, 0, 0), 20, 13.0 * 60),         # top_k 5/10/20 x 300-token chunks
    ("ragchecker_chunk_size", (3000, 6000, 8192, 0, 0, 0), 20, 26.0 * 60),   # 20 x 150/300/600, n_ctx 8192
    ("ragchecker_overlap", (6000, 6000, 6000, 0, 0, 0), 20, 33.3 * 60),      # 20 x 300, overlap 0/0.2/0.4
)
#: seconds per answer found in the cache (judged and logged, not generated): the offline judge's
#: evaluate stage of the default run, 5.4-6.7 s for its 20 answers on 2 cores (docs/cpu_speed.md)
CACHED_S = 0.35
#: chunker.size where a chunker has none (the tokens chunker's default, docs/chunking.md)
FALLBACK_CHUNK_TOKENS = 300


def fit_b(a: float = GEN_A_S, sweeps: Sequence[tuple[str, Sequence[int], int, float]] = FIT_SWEEPS) -> float:
    """:data:`GEN_B_S`: with a fixed, b minimising sum((wall / questions - a * systems - b * x)^2) over the
    sweeps, x their systems' context tokens per question summed, in thousands."""
    xs = [sum(ctx) / 1000 for _, ctx, _, _ in sweeps]
    ys = [wall / q - a * len(ctx) for _, ctx, q, wall in sweeps]
    return sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)


_CONTEXTS: dict[tuple[str, ...], list[int] | None] = {}


def contexts_of(name: str, choices: dict[str, list[str]], overrides: Sequence[str] = ()) -> list[int] | None:
    """Each system's context tokens per question (one per combination of the sweep's choices), from the
    composed config (no data loaded): ``retriever.top_k * chunker.size``, capped by a token budget
    reranker's ``tokens`` and by ``generator.server.n_ctx``; 0 for ``prompt=no_context``; a chunker without
    ``size`` counts :data:`FALLBACK_CHUNK_TOKENS`. None where any of it cannot be told: the flat rate then."""
    key = (name, repr(choices), *overrides)
    if key not in _CONTEXTS:  # a run plans each sweep once; the tests plan them often
        try:
            _CONTEXTS[key] = _contexts(name, choices, overrides)
        except Exception:  # noqa: BLE001 - the estimate only: unknown, never an error
            _CONTEXTS[key] = None
    return _CONTEXTS[key]


def systems(choices: dict[str, list[str]]) -> list[dict[str, str]]:
    """The sweep's systems, each as its choice of every swept key, in the order the estimates list them."""
    keys = list(choices)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(choices[k] for k in keys))]


def _contexts(name: str, choices: dict[str, list[str]], overrides: Sequence[str]) -> list[int] | None:
    from omegaconf import OmegaConf

    from ragsweep.conf import compose

    groups = [k for k in choices if "." not in k and k != "prompt"]  # a group's choice: composed (prompt: its name only)
    composed: dict[tuple[str, ...], Any] = {}
    out = []
    for chosen in systems(choices):
        group_ovs = tuple(f"{k}={chosen[k]}" for k in groups)
        if group_ovs not in composed:
            composed[group_ovs] = compose([f"+experiment={name}", *overrides, *group_ovs])
        cfg = composed[group_ovs]

        def value(path: str, cfg: Any = cfg, chosen: dict[str, str] = chosen) -> Any:
            return chosen[path] if path in chosen else OmegaConf.select(cfg, path)

        if str(value("prompt") if "prompt" in chosen else value("prompt.name")) == "no_context":
            out.append(0)
            continue
        tokens = int(value("retriever.top_k")) * int(value("chunker.size") or FALLBACK_CHUNK_TOKENS)
        for cap in (value("reranker.tokens"), value("generator.server.n_ctx")):
            if cap:
                tokens = min(tokens, int(cap))
        out.append(tokens)
    return out


def cached_answers(name: str, choices: dict[str, list[str]], overrides: Sequence[str] = ()) -> list[int] | None:
    """Each system's questions (one entry per system, in the order of :func:`systems`, as
    :func:`contexts_of` lists them) whose answer the shared cache already holds; zeros for a cache without any
    answer (not read further); None where it cannot be told (the estimate then counts every question)."""
    try:
        return _cached(name, choices, overrides)
    except Exception:  # noqa: BLE001 - the estimate only: unknown, never an error
        return None


def _cached(name: str, choices: dict[str, list[str]], overrides: Sequence[str]) -> list[int]:
    from omegaconf import OmegaConf

    from ragsweep.conf import compose
    from ragsweep.pipeline.summary import silenced
    from ragsweep.pipeline.sweep_spend import _works
    from ragsweep.store.cache import Cache

    each = systems(choices)

    def config(chosen: dict[str, str]) -> Any:
        return compose([f"+experiment={name}", *overrides, *(f"{k}={v}" for k, v in chosen.items())])

    first = config(each[0])
    cache = Cache(str(OmegaConf.select(first, "cache_dir")))
    try:
        if cache.count("generation") == 0:  # a cold cache: nothing more to compose or retrieve
            return [0] * len(each)
        configs = [first, *(config(c) for c in each[1:])]
        with silenced():  # the stages' progress bars: not on the command's one line per sweep
            works = _works(configs)
        if len(works) != len(configs):
            raise ValueError("a system generates nothing")
        return [len(cache.get_many("generation", list(w.keys))) for w in works]
    finally:
        cache.close()


def rates(state: Any) -> dict[str, float]:
    """Seconds per system and question of each side: measured on the finished sweeps, else the prior."""
    out = dict(PRIOR_S)
    for side in out:
        done = [e for e in state.sweeps.values() if e.get("side") == side and e.get("status") == "finished"
                and e.get("wall_s") and e.get("questions")]
        work = sum(sum(to_answer(int(e["questions"]), int(e["systems"]), e.get("cached"))) for e in done)
        if work:
            out[side] = sum(float(e["wall_s"]) for e in done) / work
    return out


def to_answer(questions: int, systems: int, cached: Sequence[int] | None = None) -> list[int]:
    """Each system's questions still to answer: ``questions`` less those its answers in the cache cover."""
    if not cached or len(cached) != systems:
        return [questions] * systems
    return [max(0, questions - int(c)) for c in cached]


def predicted_s(contexts: Sequence[float], questions: int, cached: Sequence[int] | None = None) -> float:
    """The generating systems' seconds by :data:`GEN_A_S` and :data:`GEN_B_S`, before any rescale
    (``cached``: each system's answers already in the cache, not counted)."""
    todo = to_answer(questions, len(contexts), cached)
    return sum(n * (GEN_A_S + GEN_B_S * float(c) / 1000) + (questions - n) * CACHED_S for n, c in zip(todo, contexts))


def gen_scale(state: Any, sweeps: Sequence[Any] = ()) -> float:
    """Measured / predicted seconds over the generating sweeps that finished (their contexts from
    state.json, else from the planned sweep of the same key), 1.0 before any. A rescale, not a refit: a
    run's finished sweeps are few and read the same few context sizes, which leave a and b apart
    undetermined (as the priors' own fit shows), while one ratio is always defined and keeps the
    priors' shape, a to b, and corrects the machine's speed and the prior's upper-bound contexts."""
    planned = {s.key: s.contexts for s in sweeps}
    wall = pred = 0.0
    for key, e in state.sweeps.items():
        if e.get("side") != "generation" or e.get("status") != "finished" or not e.get("wall_s") or not e.get("questions"):
            continue
        try:
            contexts = e.get("contexts") or planned.get(key)
            # what was cached when it started (state.json); never counted now: it would include its own answers
            p = predicted_s(contexts, int(e["questions"]), e.get("cached")) if contexts else 0.0
            w = float(e["wall_s"])
        except (TypeError, ValueError):
            continue
        if p > 0 and w > 0:
            wall, pred = wall + w, pred + p
    return wall / pred if pred else 1.0


def estimate_s(sweep: Any, rate: dict[str, float], scale: float = 1.0) -> float:
    """A generating sweep's systems by their contexts (:func:`predicted_s` x ``scale``); the flat
    ``rate`` of its side per system and question where they are not known, and on the retrieval side."""
    questions = sweep.questions or 300
    cached = getattr(sweep, "cached", None)
    if sweep.side == "generation" and sweep.contexts:
        return scale * predicted_s(sweep.contexts, questions, cached)
    return rate[sweep.side] * sum(to_answer(questions, sweep.systems, cached))


def time_left(sweeps: Sequence[Any], state: Any, running: Any = None, elapsed: float = 0.0) -> float:
    rate, scale = rates(state), gen_scale(state, sweeps)
    left = sum(estimate_s(s, rate, scale) for s in sweeps if not state.done(s) and s is not running)
    if running is not None:
        left += max(0.0, estimate_s(running, rate, scale) - elapsed)
    return left


def describe_rates(rate: dict[str, float], scale: float, sweeps: Sequence[Any]) -> str:
    """The header's seconds per system and question."""
    gen = f"generation {GEN_A_S:.3g} + {GEN_B_S:.3g} per 1,000 context tokens"
    if scale != 1.0:
        gen += f" x {scale:.2f} measured"
    parts = [f"retrieval {rate['retrieval']:.3g}", gen]
    if any(s.side == "generation" and not s.contexts for s in sweeps):
        parts.append(f"generation, context unknown {rate['generation']:.3g}")
    return ", ".join(parts)
