"""Bad input through the ``ragsweep`` CLI: one line ``ragsweep: error: ...`` naming the file, line
or field and what to do, a non-zero exit within seconds, no FINISHED MLflow run, and no model
server started (the default generator is the managed llama.cpp server: its registry and log
folder under ``$RAGSWEEP_STATE_DIR`` must stay empty)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from test_faults import DOCS, NO_EVAL, QUERIES, cli, external, mlflow_runs, records_of, write_jsonl  # noqa: E402


def no_server_was_started(state: Path) -> None:
    servers = state / "servers"
    assert not list(servers.glob("*.json")) if servers.is_dir() else True
    logs = servers / "logs"
    assert not (logs.is_dir() and list(logs.iterdir())), "a model server was started"


def check_error(tmp_path: Path, args: list[str], *must: str, limit_s: float = 30) -> str:
    t0 = time.monotonic()
    proc = cli(tmp_path, *args, timeout=limit_s + 60)
    seconds = time.monotonic() - t0
    assert proc.returncode != 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ragsweep: error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    line = lines[0]
    for part in must:
        assert part in line, (part, line)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert seconds < limit_s
    no_server_was_started(tmp_path / "state")
    _, found = mlflow_runs(tmp_path)
    assert not [r for r in found if r.info.status in ("FINISHED", "RUNNING")]
    return line


def corpus_rows(extra: list[dict] | None = None) -> list[dict]:
    return [{"doc_id": i, "text": t} for i, t in DOCS] + list(extra or [])


def query_rows(extra: list[dict] | None = None) -> list[dict]:
    return [{"query_id": i, "query": q, "gt_answer": a, "relevant_doc_ids": r} for i, q, a, r in QUERIES] + list(extra or [])


def jsonl_args(tmp_path: Path, corpus: list[dict] | bytes | str, queries: list[dict] | bytes | str) -> list[str]:
    paths = []
    for name, content in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        p = tmp_path / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        elif isinstance(content, str):
            p.write_text(content, encoding="utf-8")
        else:
            write_jsonl(p, content)
        paths.append(p)
    return ["dataset=jsonl", f"dataset.corpus={paths[0]}", f"dataset.queries={paths[1]}"]


# -- config errors: fail in validation, before any data is read -------------------------------------
@pytest.mark.parametrize(
    "args, must",
    [
        (["retriever.top_k=0"], ["retriever.top_k (0) must be >= 1"]),
        (["chunker.size=10", "chunker.overlap=0.99"], ["chunker.overlap (0.99 = 10 tokens) must be smaller than chunker.size (10)"]),
        (["+generator.temprature=0.5"], ["generator.temprature: unknown field", "temperature"]),
        (["prompt.template='Answer briefly. {documents}'"], ["prompt.template must contain {question}"]),
        (["prompt.template='{question} {context}'"], ["prompt.template: unknown field(s) ['context']"]),
    ],
    ids=["top_k_0", "overlap_not_below_size", "unknown_option", "template_without_question", "template_unknown_field"],
)
def test_bad_config(tmp_path, args, must):
    data = jsonl_args(tmp_path, corpus_rows(), query_rows())
    check_error(tmp_path, [*data, *args], *must)


# -- data errors -------------------------------------------------------------------------------------
BAD_DATA = {
    "corpus_not_jsonl": (
        lambda: (json.dumps({"doc_id": "d1", "text": "ok"}) + "\n{'doc_id': 'd2', 'text': 'single quotes'}\n", query_rows()),
        ["corpus.jsonl:2: not valid JSON", "one JSON object per line is expected"],
    ),
    "queries_one_json_array": (
        lambda: (corpus_rows(), json.dumps([{"query_id": "q1", "query": "x"}]) + "\n"),
        ["queries.jsonl:1: expected a JSON object, got list"],
    ),
    "query_missing_query": (
        lambda: (corpus_rows(), query_rows([{"query_id": "q9", "question": "misnamed"}])),
        ["queries.jsonl:5: missing required field 'query'"],
    ),
    "corpus_missing_doc_id": (
        lambda: (corpus_rows([{"id": "d9", "text": "no doc_id field"}]), query_rows()),
        ["corpus.jsonl:5: missing required field 'doc_id'"],
    ),
    "duplicate_doc_id": (
        lambda: (corpus_rows([{"doc_id": "d2", "text": "another text"}]), query_rows()),
        ["corpus.jsonl:5: duplicate doc_id 'd2' (first on line 2)", "must be unique"],
    ),
    "duplicate_query_id": (
        lambda: (corpus_rows(), query_rows([{"query_id": "q1", "query": "asked twice?"}])),
        ["queries.jsonl:5: duplicate query_id 'q1' (first on line 1)", "must be unique"],
    ),
    "not_utf8": (
        lambda: ((json.dumps({"doc_id": "d1", "text": "fine"}) + "\n").encode() + '{"doc_id": "d2", "text": "caf\u00e9"}\n'.encode("latin-1"), query_rows()),
        ["corpus.jsonl:2: text is not UTF-8", "re-encode the file as UTF-8"],
    ),
    "zero_documents": (
        lambda: ("", query_rows()),
        ["corpus.jsonl: the corpus has zero (non-empty) documents"],
    ),
    "only_empty_documents": (
        lambda: ([{"doc_id": "d1", "text": ""}, {"doc_id": "d2", "text": "  \n "}], [{"query_id": "q1", "query": "anything?"}]),
        ["corpus.jsonl: the corpus has zero (non-empty) documents"],
    ),
    "unknown_relevant_doc": (
        lambda: (corpus_rows(), query_rows([{"query_id": "q9", "query": "where?", "relevant_doc_ids": ["d404"]}])),
        ["queries.jsonl:5: relevant document 'd404' is not in the corpus"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_jsonl_data(tmp_path, case):
    make, must = BAD_DATA[case]
    corpus, queries = make()
    check_error(tmp_path, jsonl_args(tmp_path, corpus, queries), *must)


@pytest.mark.slow
def test_ragchecker_file_not_valid_json(tmp_path):
    path = tmp_path / "checking_inputs.json"
    path.write_text('{"results": [\n  {"query_id": "1", "query": "q",\n   "gt_answer": "a" "retrieved_context": []}\n]}\n')
    check_error(tmp_path, ["dataset=ragchecker", f"dataset.path={path}"], "checking_inputs.json:3: not valid JSON")


@pytest.mark.slow
def test_beir_qrels_naming_an_unknown_document(tmp_path):
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    write_jsonl(root / "corpus.jsonl", [{"_id": i, "title": "", "text": t} for i, t in DOCS])
    write_jsonl(root / "queries.jsonl", [{"_id": i, "text": q} for i, q, _, _ in QUERIES])
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td42\t1\n")
    check_error(tmp_path, ["dataset=beir", f"dataset.path={root}"], "qrels/test.tsv:3: corpus-id 'd42' is not in corpus.jsonl")


# -- empty documents: skipped with a warning and counted; the run goes on -----------------------------
@pytest.mark.slow
def test_empty_documents_are_skipped_warned_and_counted(tmp_path):
    from fake_openai_server import FakeOpenAIServer

    rows = corpus_rows([{"doc_id": "e1", "text": ""}, {"doc_id": "e2", "text": " \t\n"}])
    data = jsonl_args(tmp_path, rows, query_rows())
    with FakeOpenAIServer(max_seconds=600) as fake:
        proc = cli(tmp_path, *data, *external(fake.base_url), NO_EVAL, env={"RAGSWEEP_FAULTS_KEY": "sk-x"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "corpus.jsonl: skipped 2 empty document(s)" in proc.stdout + proc.stderr  # Hydra logs to stdout
    client, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] == ["FINISHED"]
    m = found[0].data.metrics
    assert m["data/empty_documents_skipped"] == 2 and m["data/documents"] == 4
    recs = records_of(client, found[0], tmp_path / "dl")
    assert not {c["doc_id"] for r in recs for c in r["retrieved_context"]} & {"e1", "e2"}
