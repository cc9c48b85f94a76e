"""``dataset=mlflow``: the questions of an MLflow evaluation dataset (``mlflow.genai.datasets``:
``inputs`` + ``expectations``) over a corpus, so a question set curated in MLflow, or logged by a
ragsweep run (:mod:`ragsweep.tracking.genai`), is one argument::

    ragsweep dataset=mlflow dataset.name=clapnq-300q-1a2b3c4d5e dataset.corpus=clapnq
    ragsweep dataset=mlflow dataset.name=my_questions dataset.corpus=~/docs      # a folder (dataset=files)
    ragsweep dataset=mlflow dataset.name=my_questions dataset.corpus=corpus.jsonl

A record's question is ``inputs.question`` (or ``inputs.query``, or its only text input); its
reference answer ``expectations.expected_response`` (else its ``expected_facts`` joined); its
relevant spans ``expectations.expected_retrieved_context`` (``doc_uri`` with ``start``/``end``, or a
whole document by ``doc_uri``); its id the tag ``query_id`` (else the record's id).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ragsweep.corpus.dataset.loaders import _check_limit, _Loader, _require_setting, finish, read_jsonl
from ragsweep.errors import DataError
from ragsweep.tracking.genai import (EXPECTED_CONTEXT, EXPECTED_FACTS, EXPECTED_RESPONSE, FROM_MLFLOW, ID_TAG, QUESTION_KEY,
                                    mlflow_module)
from ragsweep.types import Dataset, Document, Query, Span


class MlflowQuestions(_Loader):
    """The questions of MLflow evaluation dataset ``name`` over the documents of ``corpus``: a
    dataset option of ``conf/dataset`` (``clapnq``: its documents, not its questions), a folder
    (parsed as ``dataset=files``) or a JSONL file of ``{doc_id, text, title?}``."""

    @dataclass
    class Config:
        name: str | None = None
        corpus: str | None = None
        tracking_uri: str | None = None
        cache_dir: str = ".ragsweep_cache"
        limit: int | None = None

        def __post_init__(self) -> None:
            _check_limit(self.limit)
            _require_setting(self.name, "name", "mlflow", "NAME (an MLflow evaluation dataset)")
            _require_setting(self.corpus, "corpus", "mlflow", "clapnq, a folder or corpus.jsonl")

    def load(self) -> Dataset:
        c = self.config
        documents = corpus_documents(str(c.corpus), c.cache_dir)
        rows = read_question_set(str(c.name), c.tracking_uri)
        lengths = {d.doc_id: len(d.text) for d in documents}
        queries = [to_query(r, i, lengths, f"MLflow dataset {c.name!r}, record {i}") for i, r in enumerate(rows)]
        return finish(f"{FROM_MLFLOW}{c.name}", documents, queries, c.limit, f"MLflow dataset {c.name!r}")


def corpus_documents(corpus: str, cache_dir: str) -> list[Document]:
    """The documents of ``corpus`` (see :class:`MlflowQuestions`)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from ragsweep.conf import CONF_DIR

    path = Path(corpus).expanduser()
    if path.is_dir():
        from ragsweep.corpus.dataset.files import FilesDataset

        return list(FilesDataset(path=str(path), cache_dir=cache_dir).load_corpus().documents)
    if path.suffix == ".jsonl":
        return [Document(str(o["doc_id"]), str(o.get("text") or ""), o.get("title")) for _, o in read_jsonl(path)]
    option = CONF_DIR / "dataset" / f"{corpus}.yaml"
    if corpus == "mlflow" or not option.is_file():
        options = sorted(p.stem for p in option.parent.glob("*.yaml") if p.stem != "mlflow")
        raise DataError(f"dataset.corpus={corpus}: not a folder, a .jsonl file or a dataset option "
                        f"({', '.join(options)})")
    node = OmegaConf.merge({"cache_dir": cache_dir}, {"dataset": OmegaConf.load(option)})
    return list(instantiate(node.dataset).load().documents)


def read_question_set(name: str, tracking_uri: str | None = None) -> list[dict[str, Any]]:
    """The records (``inputs``, ``expectations``, ``tags``, ``dataset_record_id``) of MLflow
    evaluation dataset ``name``; DataError naming what is there when it is not."""
    import mlflow

    from ragsweep.tracking.runs import resolve_tracking_uri

    mlflow.set_tracking_uri(resolve_tracking_uri(tracking_uri))
    try:
        datasets = mlflow_module("mlflow.genai.datasets")
    except ImportError as exc:
        raise DataError(f"dataset=mlflow needs MLflow's evaluation datasets (mlflow.genai.datasets, MLflow >= 3.4): {exc}") from None
    found = datasets.search_datasets(filter_string=f"name = '{name}'", max_results=5)
    if not found:
        names = sorted({d.name for d in datasets.search_datasets(max_results=50)})
        raise DataError(f"dataset.name={name}: no MLflow evaluation dataset of that name in {mlflow.get_tracking_uri()} "
                        f"(there: {', '.join(names) if names else 'none'})")
    df = found[0].to_df()
    return df.to_dict("records")


def to_query(row: Mapping[str, Any], i: int, lengths: Mapping[str, int], where: str) -> Query:
    """One record as a :class:`Query` (its spans checked against the corpus)."""
    inputs = row.get("inputs") or {}
    exp = row.get("expectations") or {}
    texts = [v for v in inputs.values() if isinstance(v, str)]
    question = inputs.get(QUESTION_KEY) or inputs.get("query") or (texts[0] if len(texts) == 1 else None)
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: no question (inputs.{QUESTION_KEY}, inputs.query or a single text input); inputs: {sorted(inputs)}")
    gt = exp.get(EXPECTED_RESPONSE)
    if gt is None and isinstance(exp.get(EXPECTED_FACTS), list):
        gt = " ".join(str(f) for f in exp[EXPECTED_FACTS])
    spans = []
    for j, ctx in enumerate(exp.get(EXPECTED_CONTEXT) or []):
        doc = str((ctx or {}).get("doc_uri") or "")
        if doc not in lengths:
            raise DataError(f"{where}: {EXPECTED_CONTEXT}[{j}].doc_uri '{doc}' is not in the corpus")
        field = f"{where}: {EXPECTED_CONTEXT}[{j}]"
        try:
            start = int(ctx.get("start") or 0)
            end = int(ctx["end"]) if ctx.get("end") is not None else lengths[doc]
        except (TypeError, ValueError):
            raise DataError(f"{field}: start and end must be character offsets (integers), got "
                            f"start={ctx.get('start')!r}, end={ctx.get('end')!r}") from None
        if not 0 <= start < end <= lengths[doc]:
            raise DataError(f"{field}: the span [{start}, {end}) does not lie inside '{doc}' ({lengths[doc]} characters): "
                            f"fix its start/end, or leave both out to mark the whole document relevant")
        spans.append(Span(doc, start, end))
    qid = (row.get("tags") or {}).get(ID_TAG) or inputs.get("query_id") or row.get("dataset_record_id") or str(i)
    return Query(str(qid), question, str(gt) if gt is not None else None, tuple(spans))
