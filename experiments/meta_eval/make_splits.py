"""Freeze the meta-evaluation splits (issue #14, item 3): run once, before any tuning, and commit
``splits.json``. Every design choice of the offline judge is made inside the training parts only;
the held-out parts are scored once, for the figures the README and the judge card report.

    python -m experiments.meta_eval.make_splits --data ../shared/data   # writes experiments/meta_eval/splits.json

Splits (deterministic: a part is decided by sha256(SEED:suite:key), never by the labels' values
except for WiCE's stratification by label):

- ``ragchecker_human``: leave-one-domain-out over the 5 domains (folds = domains; the instance ids
  of each). Each domain is scored by choices made on the other 4 only.
- ``ragbench``: per subset, the distinct row ``id`` s (a question; delucionqa / emanual hold two
  responses per id, which stay together) are ordered by hash and split half ``dev`` / half
  ``test``. Heads and choices are fitted on ``dev`` halves; a subset's ``test`` half is scored by
  a head fitted on the *other six* subsets' ``dev`` halves (leave-one-subset-out), as the
  issue's table does on RAGBench's real test splits (which this data does not include). TRACe
  relevance is scored on the same ``test`` halves.
- ``wice``: WiCE ships dev only here, so its claims (by ``meta.id``) are split, within each label,
  half ``select`` (for thresholds / head choice) and half ``test`` (reported only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval.splits import (  # noqa: E402,F401 - load_splits: re-exported
    SPLITS_PATH, content_hash, load_splits,
)

SEED = "ragsweep-issue14-splits-v1"


def _h(*parts: str) -> str:
    return hashlib.sha256(":".join([SEED, *parts]).encode()).hexdigest()


def _halves(keys: Sequence[str], suite: str) -> tuple[list[str], list[str]]:
    order = sorted(dict.fromkeys(keys), key=lambda k: _h(suite, k))
    cut = (len(order) + 1) // 2
    return sorted(order[:cut]), sorted(order[cut:])


def make(data: str) -> dict[str, Any]:
    from experiments.meta_eval import ragchecker_human_lib as ragchecker_human
    from experiments.meta_eval import wice_lib as wice

    rc_folder = C.find_data(data, "ragchecker", ragchecker_human.HUMAN)
    _, instances, _ = ragchecker_human.load(rc_folder)
    folds: dict[str, list[int]] = {}
    for inst in instances:
        folds.setdefault(inst["dataset"], []).append(inst["instance_id"])

    rb_folder = C.find_data(data, "ragbench", "*/validation.*")
    rb: dict[str, dict[str, list[str]]] = {}
    for s in C.RAGBENCH_SUBSETS:
        rows = C.load_ragbench_subset(rb_folder / s)
        if rows:
            dev, test = _halves([str(r["id"]) for r in rows], f"ragbench:{s}")
            rb[s] = {"dev": dev, "test": test}

    w_folder = C.find_data(data, "wice", wice.FILE)
    items, claims = wice.load(w_folder)
    by_label: dict[str, list[str]] = {}
    for cid, idx in claims.items():
        by_label.setdefault(items[idx[0]]["label"], []).append(str(cid))
    select, test = [], []
    for lab in sorted(by_label):
        a, b = _halves(by_label[lab], f"wice:{lab}")
        select += a
        test += b

    splits = {
        "version": 1,
        "seed": SEED,
        "frozen_before_tuning": True,
        "how": "Made by experiments/meta_eval/make_splits.py before any tuning for issue #14: folds = the 5 "
        "RAGChecker domains (leave-one-domain-out); RAGBench row ids per subset halved by sha256(seed:subset:id) "
        "into dev (fit / choose) and test (report, with leave-one-subset-out heads); WiCE claim ids halved within "
        "each label by sha256(seed:label:id) into select (choose) and test (report).",
        "ragchecker_human": {"unit": "instance_id", "folds": {d: sorted(v) for d, v in sorted(folds.items())}},
        "ragbench": {"unit": "row id (question)", "subsets": rb},
        "wice": {"unit": "claim meta.id", "select": sorted(select), "test": sorted(test)},
    }
    splits["sha256"] = content_hash(splits)
    return splits


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", default=str(SPLITS_PATH))
    args = p.parse_args(argv)
    try:
        splits = make(args.data)
    except C.Skip as exc:
        print(f"[make_splits] skipped: {exc}")
        return 0
    Path(args.out).write_text(json.dumps(splits, indent=1) + "\n")
    rb = splits["ragbench"]["subsets"]
    print(f"[make_splits] wrote {args.out}: RAGChecker folds "
          f"{ {d: len(v) for d, v in splits['ragchecker_human']['folds'].items()} }, RAGBench dev/test ids "
          f"{ {s: (len(v['dev']), len(v['test'])) for s, v in rb.items()} }, WiCE select/test claims "
          f"{len(splits['wice']['select'])}/{len(splits['wice']['test'])}, sha256 {splits['sha256'][:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
