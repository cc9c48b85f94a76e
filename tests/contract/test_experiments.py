"""The ready-made paper sweeps in conf/experiment/: they compose, sweep the paper's values and state
the paper's directions with metric names the pipeline logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from support import CONF
from ragsweep.analysis.report import LAYOUTS, SHORT_PARAMS, parse_expect

CONF_DIR = str(CONF)
STRATEGIES = ["tokens", "recursive", "sentences", "markdown", "semantic"]
# experiment -> (hydra.sweeper.params as lists, sweep.layout, sweep.params)
EXPECTED = {
    "ragbench_case_study": (
        {"retriever": ["tfidf", "dense"], "retriever.top_k": ["2", "4"],
         "prompt": ["no_context", "short", "long", "long_cot"], "generator": ["llamacpp"]},
        "ragbench", ["retriever", "top_k", "prompt", "generator"],
    ),
    # the generator-side sweeps carry the closed-book floor (prompt=no_context) as one more option
    "ragchecker_topk": ({"retriever.top_k": ["5", "10", "20"], "prompt": ["ragchecker_default", "no_context"]},
                        "ragchecker", ["top_k"]),
    "ragchecker_chunk_size": ({"chunker.size": ["150", "300", "600"], "prompt": ["ragchecker_default", "no_context"]},
                              "ragchecker", ["chunk_size"]),
    "ragchecker_overlap": ({"chunker.overlap": ["0.0", "0.2", "0.4"], "prompt": ["ragchecker_default", "no_context"]},
                           "ragchecker", ["chunk_overlap"]),
    "ragchecker_prompt": ({"prompt": ["ragchecker_default", "ragchecker_optimized", "no_context"]}, "ragchecker", ["prompt"]),
    # retrieval only (generator=none) over every question, the oracle ceiling at every point (issue 23)
    "ragchecker_topk_retrieval": ({"retriever": ["bm25", "oracle"], "retriever.top_k": ["5", "10", "20"]},
                                  "ragchecker", ["top_k"]),
    "ragchecker_chunk_size_retrieval": ({"retriever": ["bm25", "oracle"], "chunker.size": ["150", "300", "600"]},
                                        "ragchecker", ["chunk_size"]),
    "ragchecker_overlap_retrieval": ({"retriever": ["bm25", "oracle"], "chunker.overlap": ["0.0", "0.2", "0.4"]},
                                     "ragchecker", ["chunk_overlap"]),
    # chunking strategies at an equal budget of retrieved tokens (issue 36)
    "chunking_strategies": ({"retriever": ["bm25", "oracle"], "chunker": STRATEGIES}, "ragchecker", ["chunker"]),
    "chunking_strategies_paperqa": ({"retriever": ["bm25", "oracle"], "chunker": STRATEGIES}, "ragchecker", ["chunker"]),
    "chunking_strategies_generation": ({"chunker": STRATEGIES}, "ragchecker", ["chunker"]),
}

_NAMED = {
    "ragchecker/overall": {"precision", "recall", "f1", "n_response_claims"},
    "ragchecker/retriever": {"claim_recall", "context_precision"},
    "ragchecker/generator": {"context_utilization", "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant",
                             "hallucination", "self_knowledge", "faithfulness"},
    "trace": {"relevance", "utilization", "completeness", "adherence_rate"},
    "ragas": {"faithfulness", "answer_relevance", "context_relevance"},
    "retrieval": {"recall_at_k", "mrr_at_k", "ndcg_at_k", "precision_at_k"},
}
KNOWN_METRICS = {f"{g}/{m}" for g, ms in _NAMED.items() for m in ms}

# the paper's directions each experiment must state: (metric, param, expect)
PAPER_DIRECTIONS = {
    "ragbench_case_study": [
        ("trace/relevance", "retriever", ("higher_for", "dense")),
        ("trace/relevance", "top_k", ("decreasing", None)),
        ("trace/adherence_rate", "prompt", ("lower_for", "no_context")),
        ("trace/utilization", "prompt", ("higher_for", "long_cot")),
        ("trace/completeness", "prompt", ("higher_for", "long_cot")),
    ],
    "ragchecker_topk": [
        ("ragchecker/retriever/claim_recall", "top_k", ("increasing", None)),
        ("ragchecker/generator/faithfulness", "top_k", ("increasing", None)),
        ("ragchecker/retriever/context_precision", "top_k", ("decreasing", None)),
    ],
    "ragchecker_chunk_size": [
        ("ragchecker/retriever/claim_recall", "chunk_size", ("increasing", None)),
        ("ragchecker/retriever/context_precision", "chunk_size", ("increasing", None)),
    ],
    "ragchecker_overlap": [
        ("ragchecker/retriever/context_precision", "chunk_overlap", ("increasing", None)),
        ("ragchecker/retriever/claim_recall", "chunk_overlap", ("flat", None)),
    ],
    "ragchecker_topk_retrieval": [
        ("ragchecker/retriever/claim_recall", "top_k", ("increasing", None)),
        ("ragchecker/retriever/context_precision", "top_k", ("decreasing", None)),
    ],
    "ragchecker_chunk_size_retrieval": [
        ("ragchecker/retriever/claim_recall", "chunk_size", ("increasing", None)),
        ("ragchecker/retriever/context_precision", "chunk_size", ("increasing", None)),
    ],
    "ragchecker_overlap_retrieval": [
        ("ragchecker/retriever/context_precision", "chunk_overlap", ("increasing", None)),
        ("ragchecker/retriever/claim_recall", "chunk_overlap", ("flat", None)),
    ],
    "chunking_strategies": [
        (m, "chunker", ("higher_for", s)) for m in ("retrieval/recall_at_k", "ragchecker/retriever/claim_recall")
        for s in ("recursive", "sentences", "semantic")
    ],
    "chunking_strategies_paperqa": [("retrieval/recall_at_k", "chunker", ("higher_for", s))
                                    for s in ("recursive", "sentences", "semantic")],
    "chunking_strategies_generation": [(m, "chunker", ("higher_for", "recursive")) for m in (
        "ragchecker/retriever/claim_recall", "ragchecker/generator/faithfulness", "ragchecker/overall/f1")],
    "ragchecker_prompt": [
        ("ragchecker/generator/context_utilization", "prompt", ("higher_for", "ragchecker_optimized")),
        ("ragchecker/generator/noise_sensitivity_in_relevant", "prompt", ("higher_for", "ragchecker_optimized")),
    ],
}


def _values(spec) -> list[str]:
    return [v.strip() for v in str(spec).split(",")]


def _check_sweep_node(name: str, sweep: dict) -> None:
    _, layout, params = EXPECTED[name]
    assert sweep["layout"] == layout and sweep["layout"] in LAYOUTS
    assert sweep["params"] == params and set(params) <= set(SHORT_PARAMS)
    found = set()
    for d in sweep["directions"]:
        assert d["metric"] in KNOWN_METRICS, d["metric"]
        assert d["param"] in params, d
        assert d.get("paper"), d
        kind, value, _ = parse_expect(d["expect"])
        found.add((d["metric"], d["param"], (kind, value)))
    missing = set(PAPER_DIRECTIONS[name]) - found
    assert not missing, missing


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_yaml_content(name):
    """Static check (no compose): the file's own keys."""
    path = Path(CONF_DIR) / "experiment" / f"{name}.yaml"
    text = path.read_text()
    assert text.startswith("# @package _global_")
    cfg = OmegaConf.load(path)
    assert cfg.experiment_name == name
    assert {"override /evaluator": "offline"} in OmegaConf.to_container(cfg.defaults)
    sweeper = {k: _values(v) for k, v in cfg.hydra.sweeper.params.items()}
    assert sweeper == EXPECTED[name][0]
    _check_sweep_node(name, OmegaConf.to_container(cfg.sweep))


def _compose(conf_dir: str, name: str):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
            return compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def _check_composed(name: str, cfg) -> None:
    assert cfg.experiment_name == name
    sweeper = {k: _values(v) for k, v in cfg.hydra.sweeper.params.items()}
    assert sweeper == EXPECTED[name][0]
    assert cfg.evaluator.name == "offline"
    # the paper's defaults where the sweep leaves them (RAGChecker App. D: 300 tokens, 0.2, k=20)
    assert cfg.chunker.size == 300 and cfg.chunker.overlap == 0.2
    if name.startswith("ragchecker_"):
        assert cfg.retriever.top_k == 20
        assert cfg.prompt.name == "ragchecker_default"
    _check_sweep_node(name, OmegaConf.to_container(cfg.sweep, resolve=True))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_compose(name):
    _check_composed(name, _compose(CONF_DIR, name))


def test_sweep_points_compose():
    """One point of each kind of sweep composes as Hydra would build that job."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=["+experiment=ragbench_case_study", "retriever=dense", "retriever.top_k=2", "prompt=long_cot", "generator=llamacpp"])
            assert cfg.retriever._target_.endswith("DenseRetriever") and cfg.retriever.top_k == 2 and cfg.prompt.name == "long_cot"
            cfg = compose("config", overrides=["+experiment=ragchecker_overlap", "chunker.overlap=0.0"])
            assert cfg.chunker.overlap == 0.0 and cfg.chunker.size == 300
            cfg = compose("config", overrides=["+experiment=ragchecker_topk_retrieval", "retriever=oracle", "retriever.top_k=5"])
            assert cfg.retriever._target_.endswith("OracleRetriever") and cfg.retriever.top_k == 5
            assert cfg.generator.name == "none" and cfg.generator.server is None  # no model server
            from ragsweep.pipeline.config import validate

            for strategy in ("sentences", "semantic", "markdown"):  # each strategy's own overlap, the experiment's size
                cfg = compose("config", overrides=["+experiment=chunking_strategies", f"chunker={strategy}", "retriever=oracle"])
                assert cfg.chunker._target_.startswith("ragsweep.corpus.chunking.") and cfg.chunker.size == 300
                assert cfg.reranker._target_.endswith("TokenBudgetReranker") and cfg.reranker.tokens == 1500
                validate(cfg)
    finally:
        GlobalHydra.instance().clear()
