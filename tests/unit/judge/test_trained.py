"""The trained checker (ragsweep.judge.trained): window selection, the weights file (missing,
round trip), the checker contract, and BERT's forward shared with the bundled encoder."""

from __future__ import annotations

import pytest

from ragsweep.judge import components
from ragsweep.judge.components import Checker
from ragsweep.judge.labels import ENTAILMENT, NEUTRAL
from ragsweep.judge.trained import TrainedChecker, TrainedCheckerError, select_windows

FILLER = " ".join(f"Sentence {i} talks about the weather in town number {i} today." for i in range(30))


def test_short_reference_is_scored_whole():
    ref = "Paris is the capital of France. It is large."
    assert select_windows("Paris is in France.", ref) == [ref]


def test_long_reference_gives_the_best_aligned_windows_first():
    ref = FILLER + " The Harker family built the Blue Mill in 1820. It stands on the river Vale. " + FILLER
    got = select_windows("The Blue Mill was built by the Harker family.", ref, window=2, k=3)
    assert len(got) == 3 and "The Harker family built the Blue Mill in 1820." in got[0]
    assert all(len(w.split()) < 40 for w in got)


def test_missing_weights_is_a_clear_error(tmp_path):
    ck = TrainedChecker(weights=str(tmp_path / "nope.safetensors"))
    with pytest.raises(TrainedCheckerError, match="evaluator.checker.weights.*nope.safetensors.*train_checker"):
        ck.score_pairs([("a claim here", "a reference here")])


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="top_k_windows"):
        TrainedChecker(top_k_windows=0)
    with pytest.raises(ValueError, match="max_length"):
        TrainedChecker(max_length=4096)
    with pytest.raises(ValueError, match="precision.*auto, fp32, bf16"):
        TrainedChecker(precision="int4")


def test_auto_precision_is_bf16_only_where_the_hardware_computes_it():
    from ragsweep.judge.trained import resolve_precision

    assert resolve_precision("auto", "cpu", {"avx2", "fma"}) == "fp32"  # AVX2-only CPUs emulate bf16: slower
    assert resolve_precision("auto", "cpu", {"avx512f", "avx512_bf16"}) == "bf16"  # AMD Zen 4, Intel Cooper Lake
    assert resolve_precision("auto", "cpu", {"amx_bf16", "amx_tile"}) == "bf16"  # Intel Sapphire Rapids
    assert resolve_precision("auto", "cuda") == "bf16"
    assert resolve_precision("fp32", "cuda") == "fp32" and resolve_precision("bf16", "cpu", set()) == "bf16"
    assert resolve_precision("auto", "cpu", {"avx512_vnni", "avx2"}) == "fp32"  # int8 only by name: its labels move


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The bundled MiniLM with a fresh (seeded) head, saved in fp32 as train_checker.py saves it."""
    import torch

    from ragsweep.judge.trained import build_model, save

    torch.manual_seed(0)
    model = build_model()
    path = tmp_path_factory.mktemp("w") / "w.safetensors"
    save(model, path, {"max_length": 128, "context_threshold": 0.5, "answer_threshold": 0.4}, dtype="float32")
    return path, model


@pytest.mark.slow
def test_weights_round_trip_and_contract(weights):
    import numpy as np
    import torch

    from ragsweep.judge.trained import _base, base_path, collate, encode_pairs

    path, model = weights
    spec = {**components.group_spec("checker", "trained"), "weights": str(path), "precision": "fp32"}
    ck = components.build("checker", spec)
    assert isinstance(ck, Checker) and components.component_id(ck)["weights_sha256"]
    pairs = [("Paris is the capital of France.", "Paris is the capital of France. It is large."),
             ("Rome is in Spain.", "Rome is the capital of Italy."), ("The Nile is long.", "")]
    p = ck.score_pairs(pairs)
    assert all(0.0 <= v <= 1.0 for v in p) and p[2] == 0.0  # nothing to check against: not supported
    # the loaded file scores as the in-memory model does (premise = reference first)
    encs = encode_pairs(_base(base_path())[0], [(pairs[0][1], pairs[0][0])], 128)
    with torch.inference_mode():
        ref = torch.sigmoid(model.eval()(*(torch.from_numpy(a) for a in collate(encs)))).item()
    assert p[0] == pytest.approx(ref, abs=1e-5)
    assert ck.threshold_for("context") == 0.5 and ck.threshold_for("answer") == 0.4
    labels = ck.check_pairs(pairs, kind="answer")
    assert labels == [ENTAILMENT if v >= 0.4 else NEUTRAL for v in p]
    assert ck.check_pairs(pairs) == ck.check_pairs(pairs)  # deterministic
    assert np.isclose(ck.score_pairs(pairs[:1])[0], p[0])  # a pair's P does not depend on its batch


#: a short match, a contradiction and a claim inside a long reference (windows): one precision against another
PRECISION_PAIRS = [("Paris is the capital of France.", "Paris is the capital of France. It is large."),
                   ("Rome is in Spain.", "Rome is the capital of Italy."),
                   ("The mill was built in 1820.", FILLER + " The Harker family built the Blue Mill in 1820. " + FILLER)]


@pytest.mark.slow
def test_bf16_scores_follow_fp32_and_have_their_own_cache_identity(weights):
    path, _ = weights
    fp32 = TrainedChecker(weights=str(path), precision="fp32")
    bf16 = TrainedChecker(weights=str(path), precision="bf16")
    a, b = fp32.score_pairs(PRECISION_PAIRS), bf16.score_pairs(PRECISION_PAIRS)
    assert a != b and max(abs(x - y) for x, y in zip(a, b)) < 0.02  # bf16 keeps ~3 significant digits
    assert fp32.cache_id != bf16.cache_id and fp32.cache_id["config"]["precision"] == "fp32"


def test_shared_forward_matches_the_encoder():
    import torch

    from ragsweep.corpus.bert_encoder import BertEncoder, bert_layers
    from ragsweep.corpus.embeddings import minilm_path

    enc = BertEncoder(minilm_path())
    ids = torch.tensor([[101, 7592, 2088, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    x0 = bert_layers(enc.w, ids, mask, heads=enc.heads, layers=enc.layers, eps=enc.eps)
    x1 = bert_layers(enc.w, ids, mask, heads=enc.heads, layers=enc.layers, eps=enc.eps, type_ids=torch.zeros_like(ids))
    assert torch.allclose(x0, x1)
    x2 = bert_layers(enc.w, ids, mask, heads=enc.heads, layers=enc.layers, eps=enc.eps, type_ids=torch.ones_like(ids))
    assert not torch.allclose(x0, x2)  # the claim's segment is told apart


@pytest.mark.slow
def test_thresholds_chosen_for_other_windows_are_flagged(tmp_path, weights, caplog):
    from ragsweep.judge.trained import save

    _, model = weights
    path = save(model, tmp_path / "w2.safetensors", {"max_length": 128, "context_threshold": 0.5,
                                                      "answer_threshold": 0.4, "window": 2, "top_k_windows": 3})
    with caplog.at_level("WARNING", logger="ragsweep.judge.trained"):
        TrainedChecker(weights=str(path)).load()  # the defaults (3 x 2) differ from the file's 2 x 3
    assert "evaluator.checker.window=2 and evaluator.checker.top_k_windows=3" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="ragsweep.judge.trained"):
        TrainedChecker(weights=str(path), window=2, top_k_windows=3).load()  # matching: silent
        TrainedChecker(weights=str(path), threshold=0.6, answer_threshold=0.5).load()  # own thresholds: silent
    assert caplog.text == ""


@pytest.mark.slow
def test_int8_quantizes_the_dense_maps_follows_fp32_and_has_its_own_cache_identity(weights):
    from torch.ao.nn.quantized.dynamic import Linear as QLinear

    path, _ = weights
    fp32 = TrainedChecker(weights=str(path), precision="fp32")
    int8 = TrainedChecker(weights=str(path), precision="int8")
    model = int8.load()
    packed = [c for c in model.linear.__closure__ if isinstance(c.cell_contents, dict)][0].cell_contents
    assert len(packed) == 6 * 6 and all(isinstance(q, QLinear) for q in packed.values())  # q, k, v, out, up, down x 6
    assert fp32.load().linear is None
    a, b = fp32.score_pairs(PRECISION_PAIRS), int8.score_pairs(PRECISION_PAIRS)
    assert a != b and max(abs(x - y) for x, y in zip(a, b)) < 0.05
    assert int8.cache_id != fp32.cache_id and int8.cache_id["config"]["precision"] == "int8"


def test_int8_is_for_the_cpu():
    with pytest.raises(ValueError, match="precision.*CPU only"):
        TrainedChecker(precision="int8", device="cuda")
