"""What each point of a chunking-strategy / chunk-size / overlap / top-k sweep actually changes on this corpus.

Before any work, a sweep over ``chunker`` (the strategy), ``chunker.size``, ``chunker.overlap`` or
``retriever.top_k`` is analysed point by point (each swept key varied alone, the rest at the base config):

- chunking points: chunks, chunks per document, the share of documents that fit in one chunk,
  and, against the previous point, the share of documents whose chunks are identical and the
  share of chunks that are identical (same document, same characters);
- every point: the share of questions whose relevant spans are all inside the retrieved top-k
  (at the smallest swept k, or the base k), with the configured retriever when it is cheap
  (BM25, TF-IDF) and BM25 otherwise (the figures say which);
- top-k points: the same share at each k, and whether k reaches the number of chunks;
- strategy points (each strategy at its own config, at the base ``chunker.size``): the chunking
  figures, and for every pair of strategies the share of documents whose chunks are identical.

Two points are flagged as near-identical systems when the same chunks make up at least
``NEAR`` of the documents ("chunker.size 600: the same chunks as 300 for 88% of documents";
"markdown and recursive give the same chunks for 93% of documents"), or
when the smallest k already holds every relevant span for at least ``NEAR`` of the questions,
or when several k retrieve the whole corpus. The sweep logs the warnings, and puts the figures
on its parent run (tag ``ragsweep.degenerate``, artifacts ``degeneracy.json`` and
``degeneracy.md``); :func:`report_lines` renders them for the report.

Run alone: ``python -m ragsweep.analysis.degenerate +experiment=ragchecker_chunk_size [dataset=...]``.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
from collections import defaultdict
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf

from ragsweep.corpus.dataset.doctable import doc_ids_of

log = logging.getLogger("ragsweep.degenerate")

#: swept keys this analysis understands, and their short names
KEYS = {"chunker": "chunker", "chunker.size": "chunk size", "chunker.overlap": "overlap", "retriever.top_k": "top_k"}
#: share at or above which two points count as near-identical systems
NEAR = 0.8
#: share of questions whose relevant spans are all in the top-k at the smallest k, at or above
#: which a top-k sweep can change little
TOPK_NEAR = 0.9
CHEAP_RETRIEVERS = ("bm25", "tfidf")


# -- which points ----------------------------------------------------------------------------
def _values(spec: Any) -> list[Any] | None:
    """``"150,300,600"`` (or a list) -> [150, 300, 600]; None for anything else (range(), ...)."""
    if isinstance(spec, (list, tuple)):
        items = list(spec)
    else:
        s = str(spec).strip()
        if s.startswith(("range(", "choice(", "interval(", "glob(", "tag(")) or "," not in s:
            return None
        items = [x.strip() for x in s.split(",")]
    out = []
    for x in items:
        try:
            out.append(json.loads(x) if isinstance(x, str) else x)
        except ValueError:
            out.append(x)
    return out


def sweep_points(config: DictConfig) -> dict[str, list[Any]]:
    """``{key: values}`` for the swept keys this analysis understands."""
    found: dict[str, list[Any]] = {}
    hc = config.get("hydra") if OmegaConf.is_dict(config) else None
    params = (hc.get("sweeper") or {}).get("params") if hc is not None and "sweeper" in hc else None
    for k, v in (OmegaConf.to_container(params, resolve=False) if params else {}).items():
        key = str(k).lstrip("+~")
        if key in KEYS and _values(v):
            found[key] = _values(v)
    for ov in (hc.overrides.task if hc is not None else []):
        key, _, value = str(ov).partition("=")
        key = key.lstrip("+~")
        if key in KEYS and _values(value):
            found[key] = _values(value)
    return found


# -- figures ---------------------------------------------------------------------------------
def _by_doc(chunks: Iterable[Any]) -> dict[str, set[tuple[int, int]]]:
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for c in chunks:
        out[c.doc_id].add((c.start, c.end))
    return out


def _covered(spans: Iterable[Any], chunks: Iterable[Any]) -> bool:
    """Every character of every span lies inside some retrieved chunk of its document."""
    spans = list(spans)
    if not spans:
        return False
    by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for c in chunks:
        by_doc[c.doc_id].append((c.start, c.end))
    for s in spans:
        pos = s.start
        for a, b in sorted(by_doc.get(s.doc_id, [])):
            if a <= pos < b:
                pos = b
            if pos >= s.end:
                break
        if pos < s.end:
            return False
    return True


def _coverage(queries: list[Any], chunks: list[Any], retriever_node: Any, ks: list[int], cache: Any) -> dict[int, float]:
    """Share of questions (with relevance) whose spans are all inside the top-k, for each k."""
    from hydra.utils import instantiate

    qs = [q for q in queries if q.relevant]
    if not qs or not chunks:
        return {}
    retriever = instantiate(retriever_node)
    retriever.index(chunks, cache=cache)
    depth = min(max(ks), len(chunks))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hits = retriever.search(qs, k=depth, cache=cache)
    return {k: sum(_covered(q.relevant, [h.chunk for h in hits[q.query_id][:k]]) for q in qs) / len(qs) for k in ks}


def _retriever_node(config: DictConfig) -> tuple[Any, str]:
    node = config.retriever
    target = str(node.get("_target_", ""))
    short = target.rsplit(".", 2)[-2] if target.count(".") >= 2 else target
    if short in CHEAP_RETRIEVERS:
        return node, short
    base = OmegaConf.create({"_target_": "ragsweep.rag.retriever.bm25.BM25Retriever", "top_k": int(node.get("top_k", 4))})
    return base, f"bm25 (instead of the configured {short or target}, which is not cheap to run here)"


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def analyse(config: DictConfig, points: dict[str, list[Any]] | None = None, dataset: Any = None, cache: Any = None) -> dict[str, Any]:
    """The figures and warnings for a sweep's points (see the module docstring)."""
    from hydra.utils import instantiate

    points = sweep_points(config) if points is None else points
    if dataset is None:
        dataset = instantiate(config.dataset).load()
    rnode, rname = _retriever_node(config)
    base_k = int(config.retriever.get("top_k", 4))
    ks = sorted(int(k) for k in points.get("retriever.top_k", [base_k]))
    chunk_cache: dict[tuple[Any, Any], list[Any]] = {}

    def chunks_for(size: Any, overlap: Any) -> list[Any]:
        if (size, overlap) not in chunk_cache:
            chunker = instantiate(config.chunker, size=size, overlap=overlap)
            chunk_cache[(size, overlap)] = chunker.chunk(dataset.documents, cache=cache)
        return chunk_cache[(size, overlap)]

    base_size, base_overlap = config.chunker.get("size"), config.chunker.get("overlap")
    strategy_chunks: dict[str, Any] = {}

    def chunks_of_strategy(name: str) -> Any:
        if name not in strategy_chunks:
            strategy_chunks[name] = instantiate(_strategy_node(config, name)).chunk(dataset.documents, cache=cache)
        return strategy_chunks[name]

    n_docs = len(dataset.documents)
    out: dict[str, Any] = {
        "dataset": dataset.name, "documents": n_docs, "questions": len(dataset.queries),
        "questions_with_relevance": sum(1 for q in dataset.queries if q.relevant),
        "retriever": rname, "near": NEAR, "topk_near": TOPK_NEAR, "swept": {k: list(v) for k, v in points.items()}, "points": [], "warnings": [],
    }
    for key, values in points.items():
        label = KEYS[key]
        prev = None
        ordered = values if key == "chunker" else sorted(values, key=float) if key != "retriever.top_k" else sorted(values, key=int)
        if key == "retriever.top_k":
            chunks = chunks_for(base_size, base_overlap)
            cov = _coverage(dataset.queries, chunks, rnode, ks, cache)
            for k in ordered:
                row = {"param": key, "value": k, "chunks": len(chunks), "retrieves_all_chunks": int(k) >= len(chunks),
                       "all_relevant_in_top_k": cov.get(int(k))}
                out["points"].append(row)
            small = ks[0]
            if cov and cov.get(small, 0) >= TOPK_NEAR and len(ks) > 1:
                out["warnings"].append(
                    f"top_k {small}: every relevant span is already in the top {small} for {cov[small]:.0%} of questions; "
                    f"a larger k can add relevant context for at most {1 - cov[small]:.0%} of them")
            whole = [k for k in ordered if int(k) >= len(chunks)]
            if len(whole) > 1:
                out["warnings"].append(
                    f"top_k {', '.join(map(str, whole))}: each retrieves all {len(chunks)} chunks of the corpus: the same system")
            continue
        if key == "chunker":
            _strategies(out, [str(v) for v in values], chunks_of_strategy, dataset, rnode, ks, cache)
            continue
        for v in ordered:
            size, overlap = (v, base_overlap) if key == "chunker.size" else (base_size, v)
            chunks = chunks_for(size, overlap)
            per_doc = _by_doc(chunks)
            row = _chunk_row(key, v, chunks, per_doc, dataset)
            cov = _coverage(dataset.queries, chunks, rnode, [ks[0]], cache)
            row["all_relevant_in_top_k"] = cov.get(ks[0])
            row["top_k"] = ks[0]
            if prev is not None:
                pv, pdoc = prev
                row["vs"] = pv
                row.update(_sameness(per_doc, pdoc, dataset))
                if row["same_chunks_documents"] >= NEAR:
                    out["warnings"].append(
                        f"{label} {_fmt(v)}: the same chunks as {_fmt(pv)} for {row['same_chunks_documents']:.0%} of documents "
                        f"({row['same_chunks_share']:.0%} of all chunks identical): near-identical systems")
            out["points"].append(row)
            prev = (v, per_doc)
    return out


def _chunk_row(key: str, value: Any, chunks: Any, per_doc: dict[str, set[tuple[int, int]]], dataset: Any) -> dict[str, Any]:
    n_docs = len(dataset.documents)
    counts = [len(per_doc.get(d, ())) for d in doc_ids_of(dataset.documents)]
    return {"param": key, "value": value, "chunks": len(chunks),
            "chunks_per_document_mean": round(len(chunks) / max(n_docs, 1), 3),
            "chunks_per_document_median": statistics.median(counts) if counts else 0,
            "documents_in_one_chunk": round(sum(1 for c in counts if c <= 1) / max(n_docs, 1), 4)}


def _sameness(per_doc: dict[str, set[tuple[int, int]]], other: dict[str, set[tuple[int, int]]], dataset: Any) -> dict[str, float]:
    """Share of documents whose chunks (same characters) are identical, and of identical chunks."""
    ids = list(doc_ids_of(dataset.documents))
    same_docs = sum(1 for d in ids if per_doc.get(d, set()) == other.get(d, set()))
    a = {(d, s) for d, ss in per_doc.items() for s in ss}
    b = {(d, s) for d, ss in other.items() for s in ss}
    return {"same_chunks_documents": round(same_docs / max(len(ids), 1), 4),
            "same_chunks_share": round(len(a & b) / max(len(a | b), 1), 4)}


def _strategy_node(config: DictConfig, name: str) -> Any:
    """The chunker config of strategy ``name`` (``conf/chunker/NAME.yaml``) at the base size; the
    configured chunker itself when it is that strategy (its own overrides kept)."""
    from pathlib import Path

    import ragsweep.conf

    path = Path(ragsweep.conf.__file__).parent / "chunker" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"chunker={name}: no conf/chunker/{name}.yaml")
    node = OmegaConf.load(path)
    if node.get("_target_") == config.chunker.get("_target_"):
        return config.chunker
    if config.chunker.get("size") is not None:
        node.size = config.chunker.get("size")
    return node


def _strategies(out: dict[str, Any], names: list[str], chunks_of: Any, dataset: Any, rnode: Any, ks: list[int],
                cache: Any) -> None:
    """Rows for the swept strategies, and a warning for each pair that chunks alike."""
    per: dict[str, dict[str, set[tuple[int, int]]]] = {}
    for name in names:
        chunks = chunks_of(name)
        per[name] = _by_doc(chunks)
        row = _chunk_row("chunker", name, chunks, per[name], dataset)
        row["all_relevant_in_top_k"] = _coverage(dataset.queries, chunks, rnode, [ks[0]], cache).get(ks[0])
        row["top_k"] = ks[0]
        row["same_as"] = {}
        for other in names[: names.index(name)]:
            same = _sameness(per[name], per[other], dataset)
            row["same_as"][other] = same
            if same["same_chunks_documents"] >= NEAR:
                out["warnings"].append(
                    f"chunker {other} and {name} give the same chunks for {same['same_chunks_documents']:.0%} of "
                    f"documents ({same['same_chunks_share']:.0%} of all chunks identical): near-identical systems")
        out["points"].append(row)


# -- rendering -------------------------------------------------------------------------------
def _pct(x: Any) -> str:
    return "-" if x is None else f"{x:.1%}"


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# What each swept point changes: {result['dataset']}", "",
             f"{result['documents']} documents, {result['questions']} questions "
             f"({result['questions_with_relevance']} with relevant spans); top-k coverage with {result['retriever']}.", ""]
    lines += ["| point | chunks | chunks/doc (mean, median) | docs in one chunk | same chunks as previous (docs, chunks) | all relevant spans in top-k |",
              "|---|---|---|---|---|---|"]
    for r in result["points"]:
        name = f"{KEYS[r['param']]} {_fmt(r['value'])}"
        if r["param"] == "retriever.top_k":
            lines.append(f"| {name} | {r['chunks']}{' (all retrieved)' if r['retrieves_all_chunks'] else ''} | | | | "
                         f"{_pct(r['all_relevant_in_top_k'])} at k={r['value']} |")
            continue
        same = f"{_pct(r['same_chunks_documents'])}, {_pct(r['same_chunks_share'])} (vs {_fmt(r['vs'])})" if "vs" in r else ""
        same = same or "; ".join(f"{_pct(v['same_chunks_documents'])}, {_pct(v['same_chunks_share'])} (vs {o})"
                                 for o, v in (r.get("same_as") or {}).items())
        lines.append(f"| {name} | {r['chunks']} | {r['chunks_per_document_mean']:g}, {_fmt(r['chunks_per_document_median'])} | "
                     f"{_pct(r['documents_in_one_chunk'])} | {same} | {_pct(r['all_relevant_in_top_k'])} at k={r['top_k']} |")
    lines.append("")
    lines += [f"- WARNING: {w}" for w in result["warnings"]] or ["- no near-identical points"]
    return "\n".join(lines) + "\n"


def report_lines(result: dict[str, Any] | str | None) -> list[str]:
    """Lines for the report next to the verdicts: the parent run's ``degeneracy.json`` (a dict, its
    JSON text, or a path to it) -> one line per point, then the warnings. [] when there is none."""
    if not result:
        return []
    if isinstance(result, str):
        text = result
        if not text.lstrip().startswith("{"):
            with open(text, encoding="utf-8") as fh:
                text = fh.read()
        result = json.loads(text)
    if result.get("error"):
        return [f"corpus figures: not computed ({result['error']})"]
    out = [f"corpus figures ({result['dataset']}, {result['documents']} documents; top-k coverage with {result['retriever']}):"]
    for r in result.get("points", []):
        name = f"{KEYS.get(r['param'], r['param'])} {_fmt(r['value'])}"
        if r["param"] == "retriever.top_k":
            extra = ", retrieves every chunk" if r.get("retrieves_all_chunks") else ""
            out.append(f"  {name}: all relevant spans in the top {r['value']} for {_pct(r.get('all_relevant_in_top_k'))} of questions{extra}")
            continue
        same = f"; same chunks as {_fmt(r['vs'])} for {_pct(r['same_chunks_documents'])} of documents" if "vs" in r else ""
        same += "".join(f"; same chunks as {o} for {_pct(v['same_chunks_documents'])} of documents"
                        for o, v in (r.get("same_as") or {}).items())
        out.append(f"  {name}: {r['chunks']} chunks, {r['chunks_per_document_mean']:g} per document, "
                   f"{_pct(r['documents_in_one_chunk'])} of documents in one chunk{same}; "
                   f"all relevant spans in the top {r['top_k']} for {_pct(r.get('all_relevant_in_top_k'))} of questions")
    out += [f"  WARNING: {w}" for w in result.get("warnings", [])]
    return out


# -- the sweep's hook --------------------------------------------------------------------------
def check_sweep(config: DictConfig, tracker: Any = None) -> dict[str, Any] | None:
    """Analyse a starting sweep; warn in the terminal and, with a tracker (the parent run open),
    log the tag and artifacts. Never raises: an error is logged as a warning and recorded."""
    try:
        points = sweep_points(config)
        if not points:
            return None
        from ragsweep.store.cache import Cache

        result = analyse(config, points, cache=Cache(config.cache_dir) if config.get("cache_dir") else None)
    except Exception as exc:  # noqa: BLE001 - the analysis never fails a sweep
        log.warning("could not work out what the swept points change on this corpus: %s: %s", type(exc).__name__, exc)
        result = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        for w in result["warnings"]:
            log.warning("degenerate sweep: %s", w)
        if not result["warnings"]:
            log.info("sweep points: %s", "; ".join(report_lines(result)[1:]))
    if tracker is not None:
        try:
            n = len(result.get("warnings", []))
            tracker.set_tags({"ragsweep.degenerate": "error" if "error" in result else (f"yes: {n} warning(s)" if n else "no")})
            tracker.log_json(result, "degeneracy.json")
            if "error" not in result:
                tracker.log_text(markdown(result), "degeneracy.md")
        except Exception as exc:  # noqa: BLE001
            log.warning("could not log the sweep's corpus figures to MLflow: %s", exc)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m ragsweep.analysis.degenerate [overrides...]``: the figures for a sweep, without running it."""
    from hydra import compose, initialize_config_module

    overrides = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    with initialize_config_module("ragsweep.conf", version_base=None):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    points = sweep_points(cfg)
    if not points:
        print("nothing to analyse: no chunker, chunker.size, chunker.overlap or retriever.top_k is swept")
        return 1
    from ragsweep.store.cache import Cache

    result = analyse(cfg, points, cache=Cache(cfg.cache_dir))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
