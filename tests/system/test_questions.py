"""``ragsweep-questions`` end to end as a user runs it: the real fixture files, the fake OpenAI
endpoint as the model (it writes drafts from the passages it is shown: some copied, some without
JSON), the offline checker. The set it writes is read by a ``ragsweep ... generator=none`` run,
which is tagged synthetic; bad settings end in one line naming the field, and nothing is written."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from fake_openai_server import FakeOpenAIServer, ok  # noqa: E402
from support import FIXTURES  # noqa: E402
from test_faults import KEY_ENV, cli, external, mlflow_runs, seed_mlflow  # noqa: E402

PY = sys.executable
PASSAGE = re.compile(r'Passage(?: [AB])? from "[^"]*":\n(.*?)(?=\n\n(?:Passage [AB] from|Reply with JSON))', re.S)
REMINDER = "\n\n(Your previous answer"


class Model:
    """Drafts from the passage(s) in the prompt: a sentence of each as the quote and the answer; one
    prompt in five gets prose instead of JSON (every re-ask too); closed-book questions: "I don't know"."""

    def __init__(self):
        self.garbage: set[str] = set()

    def __call__(self, body, index):
        user = body["messages"][-1]["content"]
        if user.startswith("Answer the question in one short sentence"):
            return ok("I don't know.")
        base = user.split(REMINDER)[0]
        h = hashlib.sha256(base.encode()).hexdigest()
        if int(h, 16) % 5 == 0:
            self.garbage.add(h)
            return ok("Here is a good question about the passage, I hope it helps.")
        if "does NOT answer" in user:
            return ok(json.dumps({"question": f"What colour is the cover of edition {h[:6]} of this manual?",
                                  "answer": "", "quotes": []}))
        quotes = []
        for p in PASSAGE.findall(user):
            sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", p) if len(s.split()) >= 6 and "\n" not in s.strip()]
            if sents:
                quotes.append(sents[len(sents) // 2])
        words = re.findall(r"[A-Za-z]{6,}", " ".join(quotes)) or ["things"]
        return ok(json.dumps({"question": f"How is {words[0].lower()} related to {words[-1].lower()} ({h[:6]})?",
                              "answer": quotes[0] if quotes else "", "quotes": quotes}))


def questions_cli(cwd, *args, timeout=600):
    seed_mlflow(cwd)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(cwd / "cache"),
           "RAGSWEEP_STATE_DIR": str(cwd / "state"), KEY_ENV: "sk-test"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([PY, "-m", "ragsweep.pipeline.questions.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    shutil.copytree(FIXTURES / "files", root, ignore=shutil.ignore_patterns("paper", "producers", "README.md"))
    return root


@pytest.mark.slow
def test_a_generated_set_is_grounded_counted_logged_and_read_by_a_sweep(tmp_path, docs):
    from ragsweep.corpus.dataset.files import FilesDataset

    model = Model()
    with FakeOpenAIServer(responder=model, max_seconds=900) as fake:
        proc = questions_cli(tmp_path, "dataset=files", f"dataset.path={docs}", "n=8", "oversample=2", "out=set.jsonl",
                             *external(fake.base_url))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "ragsweep-questions: files" in out and "dropped" in out and "next: ragsweep dataset=files" in out
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^    (\w+)\s+(\d+)\s", out, re.M)}
    assert counts["unparsable"] >= 1  # the prose answers, re-asked and still prose
    rows = [json.loads(line) for line in (tmp_path / "set.jsonl").read_text().splitlines()]
    dropped = [json.loads(line) for line in (tmp_path / "set.dropped.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) <= 8 and len(rows) + len(dropped) <= 16
    assert sum(counts.values()) == len(dropped)
    texts = {d.doc_id: d.text for d in FilesDataset(path=str(docs), cache_dir=str(tmp_path / "c2"), workers=1,
                                                     progress=False).load_corpus().documents}
    for r in rows:
        assert r["synthetic"] is True and r["provenance"]["model"] == "fake" and r["provenance"]["corpus_fingerprint"]
        assert r["provenance"]["prompt"].startswith("default@") and r["provenance"]["seed"] == 0
        if r["kind"] == "unanswerable":
            assert r["gt_answer"].startswith("[unanswerable]") and r["evidence"] == []
            continue
        assert r["evidence"], r  # every kept answerable question has located evidence spans
        for e in r["evidence"]:
            assert texts[e["doc_id"]][e["start"]:e["end"]] == e["quote"]
    client, runs = mlflow_runs(tmp_path, "questions")
    (run,) = runs
    assert run.info.status == "FINISHED" and run.data.tags["ragsweep.questions"] == "synthetic"
    assert run.data.metrics["questions/kept"] == len(rows)
    assert run.data.metrics["questions/dropped_unparsable"] == counts["unparsable"]
    assert rows[0]["provenance"]["run_id"] == run.info.run_id

    proc = cli(tmp_path, "-q", "dataset=files", f"dataset.path={docs}", "dataset.queries=set.jsonl", "generator=none",
               "evaluator=none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "questions are synthetic: " in proc.stdout
    _, sweep = mlflow_runs(tmp_path)
    (job,) = sweep
    assert job.data.tags["ragsweep.questions"] == "synthetic"
    assert job.data.tags["ragsweep.questions.file"].endswith("set.jsonl")
    assert job.data.metrics["data/queries_synthetic"] == len(rows)


@pytest.mark.parametrize("args, field", [
    (["n=0"], "n (0)"),
    (["generator=none"], "generator"),
    (["+kinds.trivia=1.0"], "unknown kind"),
    (["filters.copy_overlap=2"], "filters.copy_overlap"),
    (["dataset.path=/nonexistent/docs"], "dataset.path"),
])
def test_bad_settings_are_one_line_naming_the_field_and_nothing_is_written(tmp_path, docs, args, field):
    with FakeOpenAIServer(max_seconds=120) as fake:
        model = [] if args[0].startswith("generator=") else external(fake.base_url)
        proc = questions_cli(tmp_path, "dataset=files", f"dataset.path={docs}", "out=set.jsonl", *model, *args, timeout=120)
        assert fake.n_requests == 0
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragsweep-questions: error: ")]
    assert len(lines) == 1 and field in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "set.jsonl").exists()
