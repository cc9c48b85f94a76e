"""An API key never lands anywhere ragsweep writes.

A recognisable fake key is planted in the environment variable that ``generator.server.api_key_env``
(and the LLM judge's ``api_key_env``) names, for an external (fake) server. After a single run and
a 2-job sweep, the whole scratch directory (the MLflow store: db, WAL and every artifact; Hydra's
outputs/ and multirun/ with .hydra/*.yaml and *.log; the server registry and logs; the cache) and
the captured stdout/stderr are searched: the key appears nowhere. The fake server must have
received it as the bearer token, so the search is not vacuous.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from test_faults import NO_EVAL, JudgeScript, cli, external, judge_overrides, mlflow_runs, tiny_dataset  # noqa: E402

ENV = "RAGSWEEP_CANARY_KEY"


def files_containing(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if needle in data or needle.decode().encode("utf-16-le") in data:
                hits.append(str(path.relative_to(root)))
    return hits


@pytest.mark.slow
def test_api_key_is_sent_but_never_written(tmp_path):
    from fake_openai_server import FakeOpenAIServer

    canary = f"sk-ragsweep-canary-{uuid.uuid4().hex}"
    env = {ENV: canary}
    data = tiny_dataset(tmp_path)
    script = JudgeScript()
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        judge = [o for o in judge_overrides(fake.base_url) if "api_key_env" not in o]
        single = cli(
            tmp_path, *data, *external(fake.base_url, key_env=ENV), *judge, f"++evaluator.judge.api_key_env={ENV}", env=env
        )
        assert single.returncode == 0, single.stderr[-3000:]
        sweep = cli(tmp_path, "-m", *data, *external(fake.base_url, key_env=ENV), NO_EVAL, "retriever.top_k=1,2", env=env)
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        headers = list(fake.headers)
        kinds = list(script.kinds)

    # the key did its job: every request (generation and judge) carried it
    assert "generate" in kinds and "check" in kinds and "extract" in kinds
    assert headers and all(h.get("authorization") == f"Bearer {canary}" for h in headers)

    # and is nowhere else
    _, runs = mlflow_runs(tmp_path)
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 4  # single + parent + 2 children
    single_run = next(r for r in runs if r.data.tags.get("ragsweep.role") == "single")
    assert single_run.data.params["generator.server.api_key_env"] == ENV
    assert (tmp_path / "outputs").is_dir() and list((tmp_path / "multirun").rglob(".hydra/config.yaml"))
    assert list((tmp_path / "mlruns").rglob("records.json")) and (tmp_path / "mlruns" / "mlflow.db").is_file()
    for text, where in ((single.stdout + single.stderr, "single run output"), (sweep.stdout + sweep.stderr, "sweep output")):
        assert canary not in text, where
        assert canary[-12:] not in text, where  # not even a tail of it
    assert files_containing(tmp_path, canary.encode()) == []
    assert files_containing(tmp_path, canary[-12:].encode()) == []
    # the search itself works: a planted copy is found
    (tmp_path / "outputs" / "planted.txt").write_text(f"key={canary}\n")
    assert files_containing(tmp_path, canary.encode()) == ["outputs/planted.txt"]
