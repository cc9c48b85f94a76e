"""The library half of ``wice.py`` (no ``__main__``: no script imports another one): WiCE's
oracle-chunk claims and the claim score (max over its chunks), shared by that script, the
judge-agreement suite (``ja_suites``), the checker's evaluation (``checker_eval``), the offline
head's answer thresholds (``train_offline``) and the frozen splits (``make_splits``)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np

from experiments.meta_eval import common as C

FILE = "oracle_chunks_claim_dev.jsonl"


def load(folder, limit: int | None = None) -> tuple[list[dict], "OrderedDict[str, list[int]]"]:
    items = C.load_json_or_jsonl(folder / FILE)
    claims: OrderedDict[str, list[int]] = OrderedDict()
    for i, it in enumerate(items):
        meta = it.get("meta") or {}
        cid = meta.get("id") if isinstance(meta, dict) else None
        claims.setdefault(cid or it["claim"], []).append(i)
    if limit:
        claims = OrderedDict(list(claims.items())[:limit])
        keep = sorted(i for v in claims.values() for i in v)
        remap = {old: new for new, old in enumerate(keep)}
        items = [items[i] for i in keep]
        claims = OrderedDict((k, [remap[i] for i in v]) for k, v in claims.items())
    return items, claims


def per_claim(claims: "OrderedDict[str, list[int]]", chunk_scores: Sequence[float]) -> np.ndarray:
    s = np.asarray(chunk_scores, dtype=float)
    return np.array([s[idx].max() for idx in claims.values()])
