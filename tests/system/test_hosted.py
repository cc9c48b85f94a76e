"""Sweeps on a priced hosted model (issue 39), against the fake OpenAI endpoint acting like one: it
checks the API key, counts tokens as characters / 4 (the hosted APIs' rule of thumb) and, for the
storm, limits the rate with 429 + Retry-After.

- the estimate printed before a 3-system sweep holds what the sweep then spends within its range,
  and its calls are exact when its stated claims per answer are the judge's;
- a sweep budget stops a sweep mid-way (never passed), the stopped systems end KILLED with
  ``ragsweep.status=budget reached`` and their questions counted as not attempted, and the same
  sweep with a higher budget resumes it, sending no request already answered;
- a run budget does the same for one system, whose summary says so;
- a 429 storm on a low-rate key ends with every question answered, the retries counted;
- a refused key ends the run (or the sweep) before any question, naming the server, its URL and
  the variable; ``--dry-run`` prints the estimate and calls nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer, ok
from test_faults import (  # noqa: E402 - the tests folder is on sys.path
    KEY_ENV,
    cli,
    external,
    mlflow_runs,
    prompt_of,
    question_of,
    records_of,
    seed_mlflow,
    stores,
    tiny_dataset,
)

KEY = "sk-hosted-test-key"
GEN_PRICE = "{prompt: 0.5, completion: 1.5}"  # USD per 1,000 tokens (a dear fake model: readable sums)
JUDGE_PRICE = "{prompt: 0.25, completion: 1.0}"


def usage(body: dict, text: str) -> tuple[int, int]:
    """A hosted API's token count, roughly: characters / 4, plus the chat format's 3 + 4 per message."""
    msgs = body.get("messages") or []
    return 3 + 4 * len(msgs) + sum(len(m.get("content") or "") for m in msgs) // 4, max(1, len(text) // 4)


class Hosted:
    """Answers like a well-behaved hosted model: an answer per question that differs with its
    context, one triplet per text to extract (so the stated ``estimate.claims_per_answer=1`` is the
    truth), one label per claim."""

    ANSWERS = {"q1": "The tower was completed in 1889.", "q2": "Everest is the highest mountain.",
               "q3": "The Nile flows north.", "q4": "A colony has one queen."}

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, body: dict, index: int) -> Any:
        p = prompt_of(body)
        if "generate the KG for the following candidate answer" in p:
            self.kinds.append("extract")
            words = p.rsplit("### Candidate Answer:\n", 1)[1].split("\n\n### KG:", 1)[0].rstrip(".").split()
            return ok(f'("{words[0]}", "is", "{" ".join(words[1:]) or "stated"}")')
        if "### Claims:" in p:
            self.kinds.append("check")
            claims = [c for c in p.split("### Claims:\n", 1)[1].split("\n\n\nYour answer", 1)[0].split("\n") if c.strip()]
            return ok("\n".join(["Entailment"] * len(claims)))
        self.kinds.append("generate")  # an answer that depends on its context, as a real model's does
        return ok(f"{self.ANSWERS[question_of(body)].rstrip('.')} (from {len(p)} characters of context).")


def priced(base_url: str, key_env: str = KEY_ENV, judge_url: str | None = None, judge_env: str | None = None) -> list[str]:
    """A priced external generator and a priced LLM judge on the fake endpoint(s)."""
    return [
        *external(base_url, key_env=key_env, price_per_1k_tokens=GEN_PRICE),
        "evaluator=llm", "evaluator.judge.server=null", f"++evaluator.judge.base_url={judge_url or base_url}",
        "evaluator.judge.model=fake-judge", f"++evaluator.judge.api_key_env={judge_env or key_env}",
        "evaluator.judge.max_retries=0", "evaluator.trace_mode=none", "evaluator.ragas=false",
        f"evaluator.judge.price_per_1k_tokens={JUDGE_PRICE}", "estimate.claims_per_answer=1",
    ]


def sweep_runs(d: Path) -> tuple[Any, list, Any]:
    client, runs = mlflow_runs(d)
    parents = [r for r in runs if r.data.tags.get("ragsweep.role") == "parent"]
    return client, [r for r in runs if r.data.tags.get("ragsweep.role") == "child"], parents


def answered(fake: FakeOpenAIServer, start: int = 0) -> list[str]:
    return [json.dumps(b, sort_keys=True) for b in fake.requests[start:]]


@pytest.mark.slow
def test_the_estimate_before_a_3_system_sweep_holds_what_it_spends(tmp_path):
    script = Hosted()
    with FakeOpenAIServer(responder=script, usage=usage, api_key=KEY, max_seconds=900) as fake:
        proc = cli(tmp_path, "-m", *tiny_dataset(tmp_path), *priced(fake.base_url), "retriever.top_k=1,2,3",
                   env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        asked_before_first_answer = fake.models_requests
    out = proc.stdout
    estimate_at = out.index("sweep estimate before any model call: 3 systems, 12 answers")
    assert estimate_at < out.index("ragsweep: ")  # printed before the first job
    assert asked_before_first_answer >= 1  # the key was probed
    _, children, parents = sweep_runs(tmp_path)
    assert [c.info.status for c in children] == ["FINISHED"] * 3 and len(parents) == 1
    pm = parents[0].data.metrics
    spent = sum(c.data.metrics["cost/usd"] for c in children)
    assert pm["estimate/usd_low"] <= spent <= pm["estimate/usd_high"], (pm, spent)
    assert pm["estimate/usd_low"] <= pm["estimate/usd"] <= pm["estimate/usd_high"]
    # what it is made of: calls are exact where the stated model is the truth (12 answers, one
    # claim per text: extraction of 12 answers + 4 ground truths, checks shared across the systems)
    assert pm["estimate/generation_calls"] == sum(c.data.metrics["generator/calls"] for c in children) == 12
    assert pm["estimate/judge_calls"] == sum(c.data.metrics["judge/calls"] for c in children)
    assert script.kinds.count("extract") == 16
    # and after the sweep, what was spent beside the estimate, on the terminal and on the parent
    assert pm["cost/usd"] == pytest.approx(spent, abs=1e-5)
    assert re.search(r"sweep cost: \$[0-9.]+ spent by 3 run\(s\); estimated \$[0-9.]+, range", out), out[-2000:]


@pytest.mark.slow
def test_a_budget_stops_a_sweep_midway_and_a_higher_one_completes_it_paying_only_for_the_rest(tmp_path):
    data = tiny_dataset(tmp_path)
    with FakeOpenAIServer(responder=Hosted(), usage=usage, api_key=KEY, max_seconds=1200) as fake:
        dry = cli(tmp_path, "--dry-run", "-m", *data, *priced(fake.base_url), "retriever.top_k=1,2,3",
                  env={KEY_ENV: KEY})
        assert dry.returncode == 0 and fake.n_requests == 0 and fake.models_requests == 0, dry.stderr[-2000:]
        assert "nothing was called and nothing logged (--dry-run)" in dry.stdout
        assert mlflow_runs(tmp_path)[1] == []  # no run logged
        total = float(re.search(r"total      \$([0-9.]+)", dry.stdout).group(1))
        limit = round(total * 0.45, 4)  # about one system and a half

        first = cli(tmp_path, "-m", *data, *priced(fake.base_url), "retriever.top_k=1,2,3",
                    f"sweep.budget_usd={limit}", env={KEY_ENV: KEY}, timeout=600)
        assert first.returncode == 0, first.stderr[-3000:]
        n_first = fake.n_requests
        paid = set(answered(fake))
        _, children, parents = sweep_runs(tmp_path)
        spent = sum(c.data.metrics.get("cost/usd", 0.0) for c in children)
        assert 0 < spent <= limit  # stopped, and never passed
        stopped = [c for c in children if c.info.status == "KILLED"]
        assert stopped and all(c.data.tags["ragsweep.status"] == "budget reached" for c in stopped)
        assert sum(c.data.metrics.get("ledger/not_attempted", 0) for c in stopped) > 0
        assert all(c.info.status in ("FINISHED", "KILLED") for c in children)
        assert parents[0].info.status == "KILLED" and parents[0].data.tags["ragsweep.status"] == "budget reached"
        assert "BUDGET REACHED" in first.stdout

        second = cli(tmp_path, "-m", *data, *priced(fake.base_url), "retriever.top_k=1,2,3",
                     "sweep.budget_usd=1000", env={KEY_ENV: KEY}, timeout=600)
        assert second.returncode == 0, second.stderr[-3000:]
        again = answered(fake, n_first)
    assert again and not paid & set(again)  # nothing answered before was asked (or paid for) again
    _, children, parents = sweep_runs(tmp_path)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"  # the same sweep, resumed
    latest = {}
    for c in children:
        latest[c.data.tags["ragsweep.system_key"]] = c
    assert sorted(c.info.status for c in latest.values()) == ["FINISHED"] * 3
    assert all(c.data.metrics["ledger/answered"] == 4 and "ledger/not_attempted" not in c.data.metrics
               for c in latest.values())
    gen_calls = sum(c.data.metrics["generator/calls"] for c in children)
    assert gen_calls == 12  # each answer generated once over the two commands


def test_a_run_budget_ends_budget_reached_and_resumes_from_the_cache(compose_cfg, tmp_path, monkeypatch):
    from ragsweep.pipeline.summary import format_summary
    from ragsweep.pipeline.system import run_system

    monkeypatch.setenv(KEY_ENV, KEY)
    data = tiny_dataset(tmp_path)
    seed_mlflow(tmp_path)
    with FakeOpenAIServer(responder=Hosted(), usage=usage, api_key=KEY, max_seconds=600) as fake:
        first = run_system(compose_cfg(*data, *priced(fake.base_url), *stores(tmp_path), "budget_usd=2.5"))
        n_first = fake.n_requests
        paid = set(answered(fake))
        second = run_system(compose_cfg(*data, *priced(fake.base_url), *stores(tmp_path), "budget_usd=100"))
        again = answered(fake, n_first)
    assert first.status == "BUDGET REACHED" and 0 < first["cost/usd"] <= 2.5
    skipped = int(first["ledger/not_attempted"])
    assert skipped >= 1 and first["ledger/attempted"] == 4 - skipped and first["ledger/failed_generation"] == 0
    assert first["ragchecker/overall/f1/n"] == 4 - skipped  # never scored
    text = format_summary(first, ["ragchecker/overall/f1"])
    assert f"{skipped} not attempted (budget)" in text and "budget: budget_usd=2.5 " in text
    assert re.search(r"cost: \$[0-9.]+ spent \(generation \$[0-9.]+, judge \$[0-9.]+\); estimated \$", text)
    client, runs = mlflow_runs(tmp_path)
    assert runs[0].info.status == "KILLED" and runs[0].data.tags["ragsweep.status"] == "budget reached"
    led = json.loads(Path(client.download_artifacts(runs[0].info.run_id, "ledger.json", str(tmp_path / "dl")))
                     .read_text())
    assert len(led["not_attempted"]) == skipped and led["counts"]["not_attempted"] == skipped
    recs = {r["query_id"]: r for r in records_of(client, runs[0], tmp_path / "dl")}
    assert sum(1 for r in recs.values() if r.get("failure", {}).get("stage") == "budget") == skipped
    # the second run pays only for what the first did not do
    assert second.status == "FINISHED" and second["ledger/answered"] == 4
    assert not paid & set(again) and second["generator/cache_hits"] >= 4 - skipped
    assert second["generator/calls"] + first["generator/calls"] == 4
    judge_line = [ln for ln in format_summary(second, []).splitlines() if ln.startswith("judge:")]
    assert len(judge_line) == 1 and judge_line[0].endswith("judge_card.md")
    assert len(re.split(r"(?<=[.!?])\s+(?=[A-Z])", judge_line[0])) == 1  # one sentence


def test_a_429_storm_ends_with_every_question_answered(compose_cfg, tmp_path, monkeypatch):
    """16 questions at 8 in flight against a key allowed 2 requests per 0.4 s: the client halves its
    concurrency on 429s and waits out their Retry-After, so no question fails."""
    from ragsweep.pipeline.system import run_system

    monkeypatch.setenv(KEY_ENV, KEY)
    questions = [(f"s{i}", f"Question number {i} about {t.split()[1]}?", "An answer.", [d])
                 for i, (d, t) in enumerate([(d, t) for d, t in (("d1", "The Eiffel"), ("d2", "Mount Everest"),
                                                                  ("d3", "The Nile"), ("d4", "Honey bees"))] * 4)]
    data = tiny_dataset(tmp_path, queries=questions)
    seed_mlflow(tmp_path)
    with FakeOpenAIServer(default=ok("Fine."), rate_limit=(2, 0.4), api_key=KEY, max_seconds=600) as fake:
        m = run_system(compose_cfg(*data, *external(fake.base_url, concurrency=8, max_retries=3, backoff_s=0.05,
                                                    max_backoff_s=2.0), *stores(tmp_path), "evaluator=none"))
        limited = fake.rate_limited
    assert limited > 0  # a storm there was
    assert m["generator/failures"] == 0 and m["ledger/answered"] == 16
    assert m["generator/rate_limited"] == limited and m["generator/retries"] >= limited
    client, runs = mlflow_runs(tmp_path)
    led = json.loads(Path(client.download_artifacts(runs[0].info.run_id, "ledger.json", str(tmp_path / "dl")))
                     .read_text())
    assert led["calls"]["generation"]["rate_limited"] == limited and led["calls"]["generation"]["retries"] >= limited


def test_a_refused_key_ends_the_run_before_any_question_naming_its_variable(tmp_path):
    with FakeOpenAIServer(responder=Hosted(), api_key=KEY, max_seconds=300) as fake:
        proc = cli(tmp_path, *tiny_dataset(tmp_path), *priced(fake.base_url), env={KEY_ENV: "sk-revoked-0000"})
        chat = fake.n_requests
    assert proc.returncode == 2 and chat == 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragsweep: error: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert (f"the generator server at {fake.base_url} refused its API key (HTTP 401): the key is read from the "
            f"environment variable {KEY_ENV} (set here)") in lines[0]
    assert f"export {KEY_ENV}=<your key>" in lines[0]
    assert "sk-revoked-0000" not in proc.stderr + proc.stdout and "0000" not in lines[0]
    _, runs = mlflow_runs(tmp_path)
    assert [r.info.status for r in runs] == ["FAILED"] and "refused its API key" in runs[0].data.tags["ragsweep.error"]


def test_a_refused_judge_key_ends_the_run_before_any_generation(compose_cfg, tmp_path, monkeypatch):
    from ragsweep.errors import RagsweepError
    from ragsweep.pipeline.system import run_system

    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("RAGSWEEP_JUDGE_KEY", "sk-wrong")
    data = tiny_dataset(tmp_path)
    seed_mlflow(tmp_path)
    with FakeOpenAIServer(responder=Hosted(), api_key=KEY) as gen, \
            FakeOpenAIServer(responder=Hosted(), api_key="sk-judge") as judge:
        cfg = compose_cfg(*data, *priced(gen.base_url, judge_url=judge.base_url, judge_env="RAGSWEEP_JUDGE_KEY"),
                          *stores(tmp_path))
        with pytest.raises(RagsweepError, match=r"the judge server at .* refused its API key \(HTTP 401\): the key is "
                                                r"read from the environment variable RAGSWEEP_JUDGE_KEY"):
            run_system(cfg)
        assert gen.n_requests == 0 and judge.n_requests == 0  # no question was tried


@pytest.mark.slow
def test_a_refused_key_stops_a_sweep_before_its_first_job(tmp_path):
    with FakeOpenAIServer(responder=Hosted(), api_key=KEY, max_seconds=300) as fake:
        proc = cli(tmp_path, "-m", *tiny_dataset(tmp_path), *priced(fake.base_url), "retriever.top_k=1,2",
                   env={KEY_ENV: "sk-revoked-0000"})
        chat = fake.n_requests
    assert proc.returncode != 0 and chat == 0
    assert f"refused its API key (HTTP 401): the key is read from the environment variable {KEY_ENV}" in proc.stderr
    assert "sk-revoked-0000" not in proc.stderr + proc.stdout
    assert sweep_runs(tmp_path)[1] == []  # no job ran


def test_a_dry_run_calls_nothing_logs_nothing_and_needs_no_key(compose_cfg, tmp_path, monkeypatch):
    from ragsweep.pipeline.summary import format_summary
    from ragsweep.pipeline.system import run_system

    monkeypatch.delenv(KEY_ENV, raising=False)
    data = tiny_dataset(tmp_path)
    seed_mlflow(tmp_path)
    with FakeOpenAIServer(responder=Hosted(), usage=usage, api_key=KEY) as fake:
        result = run_system(compose_cfg(*data, *priced(fake.base_url), *stores(tmp_path), "sweep.dry_run=true"))
        assert fake.n_requests == 0 and fake.models_requests == 0
    assert result.status == "DRY RUN" and result["estimate/generation_calls"] == 4
    assert result["estimate/usd_low"] <= result["estimate/usd"] <= result["estimate/usd_high"]
    text = format_summary(result, [])
    assert "estimate before any model call: 1 system, 4 answers" in text and text.endswith("(--dry-run)")
    assert mlflow_runs(tmp_path)[1] == []
