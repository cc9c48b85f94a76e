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
                "**offline**, sentence claims, Entailment share", "mean P(entailed)"):
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
    with pytest.raises(SystemExit, match="not available in this build yet"):
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
