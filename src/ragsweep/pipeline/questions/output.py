"""What a question set leaves behind: the questions file (the format every ``dataset.queries`` reads,
:mod:`ragsweep.corpus.dataset.queries`), the dropped candidates with their reasons beside it, the
counts printed and logged to its own MLflow run."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragsweep.pipeline.questions.generate import REASONS, Candidate
from ragsweep.records import ABSTENTION

#: what each drop reason means, as the report prints it
WHY = {
    "failed": "the model call failed after its retries",
    "unparsable": "no usable JSON {question, answer, quotes}, re-asks included",
    "no_evidence": "no quote located in the passage's document",
    "one_sided": "a two-passage question with evidence in one passage only",
    "copies_evidence": "the question copies its evidence (word 3-gram overlap)",
    "duplicate": "duplicates a question kept before it (MiniLM cosine)",
    "check_failed": "the checker gave no label for the answer",
    "not_entailed": "the answer is not entailed by its evidence (evaluator.checker)",
    "closed_book": "the model answers it correctly with no context",
}


def row(c: Candidate, query_id: str, provenance: dict[str, Any]) -> dict[str, Any]:
    """A kept candidate as one line of the questions file."""
    ev = [{"doc_id": e.doc_id, "quote": e.quote, "start": e.start, "end": e.end} for e in c.evidence]
    return {
        "query_id": query_id,
        "query": c.draft.question,
        "gt_answer": c.draft.answer if c.answerable else ABSTENTION,
        "kind": c.sample.kind,
        "relevant_doc_ids": list(dict.fromkeys(e.doc_id for e in c.evidence)),
        "evidence": ev,
        "synthetic": True,
        "provenance": {**provenance, "candidate": c.index,
                       "passages": [{"doc_id": w.doc_id, "start": w.start, "end": w.end, "where": w.stratum}
                                    for w in c.sample.windows]},
        "checks": c.checks,
    }


def dropped_row(c: Candidate) -> dict[str, Any]:
    return {"candidate": c.index, "kind": c.sample.kind, "reason": c.drop, "detail": c.detail,
            "question": c.draft.question if c.draft else None, "answer": c.draft.answer if c.draft else None,
            "quotes": c.draft.quotes if c.draft else None, "evidence": [e.as_dict() for e in c.evidence],
            "checks": c.checks, "passages": [{"doc_id": w.doc_id, "start": w.start, "end": w.end, "where": w.stratum}
                                             for w in c.sample.windows]}


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """All lines or nothing: written beside ``path`` and moved into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def dropped_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".dropped.jsonl")


def metrics(counts: dict[str, int], seconds: dict[str, float], wall_s: float, stats: dict[str, int]) -> dict[str, float]:
    """What the MLflow run gets: every count (``questions/...``), the share surviving each check,
    the time per step, the rates, the model calls."""
    out: dict[str, float] = {f"questions/{k}": float(v) for k, v in counts.items()}
    n = max(1, counts["candidates"])
    for r in REASONS:
        out[f"questions/survive_{r}"] = counts[f"after_{r}"] / n
    out.update({f"time/{k}_s": float(v) for k, v in seconds.items()})
    out["time/total_s"] = round(wall_s, 3)
    out["questions/kept_per_minute"] = counts["kept"] / (wall_s / 60) if wall_s > 0 else float("nan")
    out["questions/candidates_per_minute"] = counts["candidates"] / (wall_s / 60) if wall_s > 0 else float("nan")
    for k in ("requests", "calls", "cache_hits", "failures", "retries", "prompt_tokens", "completion_tokens"):
        out[f"generator/{k}"] = float(stats.get(k, 0))
    return out


def report(name: str, counts: dict[str, int], n: int, seed: int, wall_s: float, out: Path, spans: int,
           provenance: dict[str, Any], notes: Sequence[str], run_line: str, next_cmd: str) -> str:
    """The summary printed at the end."""
    c = counts
    lines = [f"ragsweep-questions: {name}  {c['kept']} of {n} questions kept from {c['candidates']} candidates "
             f"(seed {seed}) in {wall_s:.1f}s ({c['kept'] / max(wall_s / 60, 1e-9):.1f} kept/min)"]
    kinds = ", ".join(f"{k.removeprefix('kept_')} {v}" for k, v in c.items() if k.startswith("kept_"))
    lines.append(f"  kept by kind: {kinds or 'none'}" + (f"; {c['surplus']} more passed every check (not needed: n={n})"
                                                         if c["surplus"] else ""))
    lines.append(f"  dropped {c['dropped']}, by reason in the order checked (share of the candidates; left after it):")
    for r in REASONS:
        k = c[f"dropped_{r}"]
        lines.append(f"    {r:<16}{k:>5}  {k / max(1, c['candidates']):>6.1%}  {c[f'after_{r}']:>5}   {WHY[r]}")
    answerable = sum(v for k, v in c.items() if k.startswith("kept_") and k != "kept_unanswerable")
    lines.append((f"  evidence: every one of the {answerable} answerable questions has located spans ({spans} in all); "
                  if answerable else "  evidence: no answerable question was kept, so the set measures abstention only (no "
                  "retrieval metric); a stronger model (generator=vllm or generator=external) or a larger oversample helps; ")
                 + f"{c.get('kept_unanswerable', 0)} unanswerable ones have none and expect an abstention")
    for note in notes:
        lines.append(f"  note: {note}")
    lines.append(f"  wrote {out} ({c['kept']} questions); the dropped candidates and why: {dropped_path(out)}")
    lines.append(f"  provenance: model {provenance.get('model')}, prompt {provenance.get('prompt')}, corpus fingerprint "
                 f"{str(provenance.get('corpus_fingerprint'))[:12]}...")
    if run_line:
        lines.append(f"  {run_line}")
    if next_cmd:
        lines.append(f"  next: {next_cmd}")
    return "\n".join(lines)


__all__ = ["WHY", "dropped_path", "dropped_row", "metrics", "report", "row", "write_jsonl"]
