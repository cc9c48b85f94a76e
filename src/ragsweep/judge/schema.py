"""RAGChecker input/output files: read, validate, write.

Input (one record per query, the ragsweep record)::

    {"results": [{"query_id", "query", "gt_answer", "response",
                  "retrieved_context": [{"doc_id", "text"}, ...]}, ...]}

``gt_answer`` may be missing, null or blank (no ground truth: the metrics that need it are NaN).
``doc_id`` may be missing or null (as in RAGChecker's ``RetrievedDoc``).

Output = the input plus, per record, ``response_claims``, ``gt_answer_claims`` (each claim a
string or a list of strings such as a triplet), the four entailment matrices (orientation in
:mod:`ragsweep.judge.ragchecker_metrics`) and ``metrics``; plus a top-level ``metrics``
``{"overall", "retriever", "generator"}``. As RAGChecker writes it, per-record metrics are
fractions in [0, 1] and the top-level ones percentages rounded to one decimal. Undefined values
(NaN) are written as ``null`` so that the file stays strict JSON.

Every error is a :class:`SchemaError` whose one-line message names the file, the record and the
field: ``data.json: results[3]: missing field 'response'``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragsweep.errors import DataError
from ragsweep.judge.ragchecker_metrics import (
    MATRIX_FIELDS,
    N_CLAIMS,
    compute_example_metrics,
    has_gt,
)

CLAIM_FIELDS = ("response_claims", "gt_answer_claims")
OUTPUT_FIELDS = CLAIM_FIELDS + MATRIX_FIELDS
#: Fields that a record needs for the metrics that do not depend on the ground truth.
_GT_FREE_FIELDS = ("response_claims", "retrieved2response")


class SchemaError(DataError):
    """A RAGChecker file is malformed; the message names file, record and field."""


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def load_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SchemaError(f"{path}: not UTF-8 text: {e.reason} at byte {e.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def _records(data: Any, path: str | Path) -> list[dict]:
    if not isinstance(data, dict):
        raise SchemaError(f'{path}: expected a JSON object {{"results": [...]}}, got {_type(data)}')
    if "results" not in data:
        raise SchemaError(f"{path}: missing field 'results'")
    results = data["results"]
    if not isinstance(results, list):
        raise SchemaError(f"{path}: field 'results' must be a list, got {_type(results)}")
    return results


def validate_record(record: Any, index: int, path: str | Path = "<input>") -> None:
    """Check one record's input fields (and its claim lists, where present); raise
    :class:`SchemaError` naming file, index and field."""
    where = f"{path}: results[{index}]"
    if not isinstance(record, dict):
        raise SchemaError(f"{where}: expected an object, got {_type(record)}")
    expected = {
        "query_id": (str, int),
        "query": (str,),
        "response": (str,),
        "retrieved_context": (list,),
    }
    for name, types in expected.items():
        if name not in record:
            raise SchemaError(f"{where}: missing field '{name}'")
        value = record[name]
        if not isinstance(value, types) or isinstance(value, bool):
            want = " or ".join(t.__name__ for t in types)
            raise SchemaError(f"{where}: field '{name}' must be {want}, got {_type(value)}")
    gt = record.get("gt_answer")
    if gt is not None and not isinstance(gt, str):
        raise SchemaError(f"{where}: field 'gt_answer' must be str or null, got {_type(gt)}")
    for j, chunk in enumerate(record["retrieved_context"]):
        at = f"{where}.retrieved_context[{j}]"
        if not isinstance(chunk, dict):
            raise SchemaError(f"{at}: expected an object {{doc_id, text}}, got {_type(chunk)}")
        if "text" not in chunk:
            raise SchemaError(f"{at}: missing field 'text'")
        if not isinstance(chunk["text"], str):
            raise SchemaError(f"{at}: field 'text' must be str, got {_type(chunk['text'])}")
        doc_id = chunk.get("doc_id")
        if doc_id is not None and (not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool)):
            raise SchemaError(f"{at}: field 'doc_id' must be str, int or null, got {_type(doc_id)}")
    for name in CLAIM_FIELDS:
        claims = record.get(name)
        if claims is None:
            continue
        if not isinstance(claims, list):
            raise SchemaError(f"{where}: field '{name}' must be a list, got {_type(claims)}")
        for j, claim in enumerate(claims):
            ok = isinstance(claim, str) or (
                isinstance(claim, list) and all(isinstance(p, str) for p in claim)
            )
            if not ok:
                raise SchemaError(
                    f"{where}.{name}[{j}]: a claim must be a string or a list of strings, "
                    f"got {_type(claim)}"
                )


def is_output_record(record: Mapping[str, Any]) -> bool:
    """True when the record holds the claims and matrices the metrics need (no model call).

    A record with a ground truth needs all six output fields; one without needs only
    ``response_claims`` and ``retrieved2response`` (the rest are undefined for it).
    """
    needed = OUTPUT_FIELDS if has_gt(record) else _GT_FREE_FIELDS
    return all(record.get(f) is not None for f in needed)


def is_output_file(records: Sequence[Mapping[str, Any]]) -> bool:
    """True when every record is an output record (see :func:`is_output_record`)."""
    return bool(records) and all(is_output_record(r) for r in records)


def validate_output_record(record: Mapping[str, Any], index: int, path: str | Path = "<input>") -> None:
    """Check the shapes and labels of the entailment matrices of one record (those present)."""
    example_metrics(record, index, path)


def read_records(path: str | Path) -> list[dict]:
    """Read a RAGChecker input or output file and check every record with
    :func:`validate_record`; return the records. The matrices are checked when the metrics are
    computed (:func:`ragsweep.pipeline.score_cli.build_output`), or on their own with :func:`validate_output_record`."""
    records = _records(load_json(path), path)
    for i, rec in enumerate(records):
        validate_record(rec, i, path)
    return records


def jsonable(value: Any) -> Any:
    """Copy of ``value`` with NaN/inf floats as None and numpy scalars as Python numbers."""
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def example_metrics(record: Mapping[str, Any], index: int, path: str | Path) -> dict[str, float]:
    try:
        return compute_example_metrics(record)
    except ValueError as e:
        raise SchemaError(f"{path}: results[{index}].{e}") from None


def write_output(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write an output document (from :func:`ragsweep.pipeline.score_cli.build_output`) as strict, indented JSON."""
    text = json.dumps(jsonable(document), indent=2, ensure_ascii=False, allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")
