"""The meta-eval suites run end to end on the tiny shipped fixtures and skip cleanly without data."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `pytest` (unlike `python -m pytest`) does not put the repo root on sys.path
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval import ragbench, ragchecker_human, scifact_retrieval, wice  # noqa: E402

FIX = Path(__file__).resolve().parent / "fixtures" / "meta_eval"


def _run(mod, tmp_path, capsys, *extra):
    """Run a suite's main() on the fixtures; the checker runs lexical-only (no model) unless asked."""
    out = tmp_path / "table.md"
    if "--model" not in extra and mod is not scifact_retrieval:
        extra = ("--model", "none", *extra)
    rc = mod.main(["--data", str(FIX), "--out", str(out), "--cache", str(tmp_path / "cache"), *extra])
    printed = capsys.readouterr().out
    assert rc == 0
    assert out.is_file() and out.read_text().strip() in printed
    return printed


def test_ragchecker_human_suite(tmp_path, capsys):
    text = _run(ragchecker_human, tmp_path, capsys)
    for row in ("annotator 1 vs annotator 2", "RAGChecker (Llama3-70B", "ROUGE-L", "token P / R / F1",
                "offline, sentence claims, Entailment share (answer_threshold 0.30)",
                "**offline**, clause claims = the default evaluator's, Entailment share", "mean P(entailed)"):
        assert row in text
    assert "| scorer | correctness P | S | completeness P | S | overall P | S |" in text
    assert "6 response pairs, 12 annotator labels" in text


def test_wice_suite(tmp_path, capsys):
    text = _run(wice, tmp_path, capsys)
    for row in ("**offline** (head trained on RAGBench only", "token overlap", "GPT-4 (published", "T5-3B"):
        assert row in text
    assert "9 claims (3 supported, 3 partially, 3 not)" in text


def test_ragbench_suite(tmp_path, capsys):
    text = _run(ragbench, tmp_path, capsys)
    for row in ("leave-one-subset-out head", "shipped head (in-sample", "token overlap", "gpt3_adherence"):
        assert row in text
    assert "| scorer | covidqa | hotpotqa | msmarco | mean |" in text
    # the TRACe RMSE table: every "ours" and constant row finite; the GPT-3.5 judge columns are filled in the fixture
    assert "not in this suite yet" not in text
    assert "| scorer, metric | covidqa | hotpotqa | msmarco | mean |" in text
    table = text[text.index("| scorer, metric |"):].split("\n\n")[0].splitlines()[2:]
    cells = {r.split(" | ")[0].lstrip("| "): r.strip(" |").split(" | ")[1:] for r in table}
    want = ("**offline**, relevance: question cosine", "offline, relevance: question cosine (MiniLM) >= 0.5 only",
            "offline, relevance: question cosine (MiniLM) >= 0.5, or utilized (entailment)",
            "**offline**, utilization: trace_attribution=cover", "offline, utilization: trace_attribution=entailment",
            "**offline**, completeness", "offline, completeness (relevant = question cosine (MiniLM) >= 0.5 only",
            "offline, completeness (entailment)",
            "constant: mean shipped relevance_score", "constant: mean shipped utilization_score",
            "constant: mean shipped completeness_score", "gpt3_context_relevance", "gpt35_utilization")
    for prefix in want:
        (vals,) = [v for k, v in cells.items() if k.startswith(prefix)]
        assert len(vals) == 4 and all(math.isfinite(float(v)) and 0 <= float(v) <= 1 for v in vals), (prefix, vals)
    assert cells["rows"][:3] == ["4", "4", "4"]


class _FakeChecker:
    """check_pairs: Entailment for the pairs in ``yes``; records each call."""

    def __init__(self, yes):
        self.yes, self.calls = set(yes), []

    def check_pairs(self, pairs, cache=None):
        self.calls.append(list(pairs))
        return ["Entailment" if p in self.yes else "Neutral" for p in pairs]


def test_ragbench_suite_label_only_checker(tmp_path, capsys, monkeypatch):
    """A checker with labels only (as llm / nli) runs the same path: no utilized sentence -> utilization 0."""
    monkeypatch.setattr(C, "checker_from_args", lambda args: _FakeChecker(set()))
    text = _run(ragbench, tmp_path, capsys, "--checker", "fake", "--limit", "2")
    assert "| rows | 2 | 2 | 2 |  |" in text
    line = next(r for r in text.splitlines() if r.startswith("| **fake**, utilization"))
    vals = [float(v) for v in line.strip(" |").split(" | ")[1:]]
    assert len(vals) == 4 and all(math.isfinite(v) for v in vals)


def test_ragbench_utilized_keys_logic():
    row = {
        "documents_sentences": [[["0a", "A1."], ["0b", "A2."]], [["1a", "B1."], ["1b", "B2."]], []],
        "response_sentences": [["a", "X."], ["b", "Y."]],
    }
    other = {"documents_sentences": [[["0a", "C1."], ["0b", "C2."]]], "response_sentences": [["a", "Z."]]}
    yes = {
        ("X.", "A1. A2."),  # X is entailed by document 0 ...
        ("X.", "A2."),  # ... and inside it by 0b only
        ("Y.", "B1."),  # Y is entailed by sentence 1a alone, but not by document 1: pruned, not utilized
        ("Y.", "A1. A2."), ("Y.", "A1."),  # Y entailed by document 0 and its sentence 0a
        ("Z.", "C1."),  # sentence-level only for the other row: not utilized
    }
    fake = _FakeChecker(yes)
    assert ragbench.utilized_keys(fake, [row, other]) == [["0a", "0b"], []]
    assert len(fake.calls) == 2  # one call per stage for all rows
    assert sorted(fake.calls[0]) == sorted({("X.", "A1. A2."), ("X.", "B1. B2."), ("Y.", "A1. A2."),
                                            ("Y.", "B1. B2."), ("Z.", "C1. C2.")})  # empty document skipped
    assert sorted(fake.calls[1]) == [("X.", "A1."), ("X.", "A2."), ("Y.", "A1."), ("Y.", "A2.")]
    # completeness etc. from those keys, RAGBench's Len (sentence counts over its keys)
    s = ragbench.trace_predictions([row], [["0a", "1a"]], [["0a", "0b"]])
    assert np.allclose([s["relevance"][0], s["utilization"][0], s["completeness"][0]], [0.5, 0.5, 0.5])


def test_ragbench_cover_keys_greedy():
    row = {
        "documents_sentences": [
            [["0a", "Paris is the capital city of France."], ["0b", "The Seine river flows through Paris."]],
            [["1a", "France borders Spain, Italy and Germany."], ["1b", "Bread costs little."]],
        ],
        "response_sentences": [
            ["a", "Paris, the capital of France, lies on the Seine river and borders Spain and Italy."],
            ["b", "Bread is cheap."],  # one shared word: below the minimum, no sentence
        ],
    }
    # 1a supplies france/border/spain/italy (4), then 0b paris/seine/river (3 new); 0a adds only
    # capital (1 new): stop
    assert ragbench.cover_keys([row]) == [["1a", "0b"]]
    assert ragbench.cover_keys([row], min_new=1) == [["1a", "0b", "0a", "1b"]]


def test_ragbench_question_relevant_keys_and_rmse():
    vec = {"q": [1.0, 0.0], "near": [0.8, 0.6], "far": [0.0, 1.0], "edge": [0.5, 0.866025]}

    class Emb:
        def encode(self, texts):
            return np.array([vec[t] for t in texts])

    row = {"question": "q", "documents_sentences": [[["0a", "near"], ["0b", "far"]], [["1a", "edge"]]]}
    assert ragbench.question_relevant_keys(Emb(), [row]) == [["0a", "1a"]]  # cosine >= 0.5 (0.8, 0.5)
    assert math.isclose(ragbench.rmse(np.array([0.0, 1.0]), np.array([0.0, 0.0])), math.sqrt(0.5))
    assert math.isnan(ragbench.rmse(np.array([0.0, 1.0]), np.array([0.0, np.nan])))  # column not filled on every row


def test_scifact_suite_sparse(tmp_path, capsys):
    text = _run(scifact_retrieval, tmp_path, capsys, "--retrievers", "tfidf,bm25:rank_bm25,bm25:bm25s")
    assert "Anserini BM25 flat" in text
    for name in ("tfidf", "bm25:rank_bm25", "bm25:bm25s"):
        assert f"| {name} | 1.000 | 1.000 |" in text  # three easy queries, each finds its abstract first


@pytest.mark.parametrize("mod", [ragchecker_human, wice, ragbench, scifact_retrieval])
def test_missing_data_skips(mod, tmp_path, capsys):
    out = tmp_path / "t.md"
    assert mod.main(["--data", str(tmp_path / "nope"), "--out", str(out)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not out.exists()


def test_unknown_checker_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="not available or not configured here"):
        C.make_checker("surely-not-a-checker")


def test_normalise_matches_ragchecker_meta_eval():
    d = ragchecker_human.normalise([0.1, float("nan"), 0.5, 0.3])
    assert np.allclose(d, [-2.0, 0.0, 2.0, 0.0])


def test_lexical_baselines():
    assert C.token_prf("the cat sat", "the cat sat") == (1.0, 1.0, 1.0)
    p, r, f = C.rouge_l("a b c d", "a x c d")
    assert math.isclose(p, 0.75) and math.isclose(r, 0.75)
    assert C.content_overlap("Paris is big", "paris") == 0.5
    assert C.auroc([0, 1, 1], [0.1, 0.9, 0.8]) == 1.0
    assert math.isnan(C.auroc([1, 1], [0.1, 0.2]))
