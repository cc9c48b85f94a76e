"""The meta-eval suites run end to end on the tiny shipped fixtures and skip cleanly without data."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from support import FIXTURES, ROOT
if str(ROOT) not in sys.path:  # `pytest` (unlike `python -m pytest`) does not put the repo root on sys.path
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval import ragbench, ragchecker_human, scifact_retrieval, wice  # noqa: E402

FIX = FIXTURES / "meta_eval"


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


# -- issue #14: frozen splits, out-of-sample protocol, judge_agreement.json -----------------------
import hashlib  # noqa: E402
import json  # noqa: E402

from experiments.meta_eval import ja_core as JK  # noqa: E402 - the suites read B_BOOT, fit_head from here
from experiments.meta_eval import judge_agreement as JA  # noqa: E402
from experiments.meta_eval import make_splits as MS  # noqa: E402
from ragsweep.judge.offline import FEATURES  # noqa: E402


def test_splits_file_is_frozen_and_disjoint():
    s = MS.load_splits()  # raises when the committed file was edited (sha256 of its content)
    assert s["frozen_before_tuning"] and s["seed"] == MS.SEED and len(s["how"]) > 50
    folds = s["ragchecker_human"]["folds"]
    assert sorted(folds) == ["clapnq", "kiwi", "novelqa", "robustqa/fiqa", "robustqa/writing"]
    every = [i for v in folds.values() for i in v]
    assert len(every) == len(set(every)) == 140  # each pair in exactly one held-out domain
    for sub, parts in s["ragbench"]["subsets"].items():
        assert parts["dev"] and parts["test"] and not set(parts["dev"]) & set(parts["test"]), sub
        assert abs(len(parts["dev"]) - len(parts["test"])) <= 1
    assert not set(s["wice"]["select"]) & set(s["wice"]["test"])
    assert len(s["wice"]["select"]) + len(s["wice"]["test"]) == 349


def test_splits_are_reproducible_and_tamper_evident(tmp_path):
    a, b = MS.make(str(FIX)), MS.make(str(FIX))
    assert a == b and a["sha256"] == MS.content_hash(a)
    a["wice"]["test"].append(a["wice"]["select"].pop())  # move one claim by hand
    p = tmp_path / "s.json"
    p.write_text(json.dumps(a))
    with pytest.raises(ValueError, match="frozen"):
        MS.load_splits(p)


def _synthetic_ragbench(seed=0, flip_test=False):
    """3 subsets x 40 rows x 3 sentences with random features; labels follow feature 0. With
    ``flip_test`` the held-out (test) rows' labels are inverted."""
    rng = np.random.default_rng(seed)
    rb = {}
    for s in ("a", "b", "c"):
        n = 40
        part = np.array(["dev" if i % 2 == 0 else "test" for i in range(n)])
        row = np.repeat(np.arange(n), 3)
        X = rng.normal(size=(3 * n, len(FEATURES)))
        y = (X[:, 3] + rng.normal(scale=0.7, size=3 * n) > -0.8).astype(int)
        if flip_test:
            y = np.where(part[row] == "test", 1 - y, y)
        adherent = np.array([int(y[row == i].all()) for i in range(n)])
        rows = [{"id": str(i), "response": "w" * (i % 5 + 1), "documents_sentences": [[["0a", "w"]]]} for i in range(n)]
        rb[s] = {"rows": rows, "part": part, "adherent": adherent, "y": y, "row": row, "sent_part": part[row],
                 "f": JA.Feats(X, np.zeros(3 * n, bool), np.zeros(3 * n, bool))}
    return rb


def test_ragbench_protocol_never_trains_or_chooses_on_held_out_rows(monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    seen = []
    real = JK.fit_head
    monkeypatch.setattr(JK, "fit_head", lambda X, y, *a, **k: (seen.append(X.copy()), real(X, y, *a, **k))[1])
    rb = _synthetic_ragbench()
    res = JA.ragbench_adherence(rb)
    test_rows = {r.tobytes() for d in rb.values() for r in d["f"].X[d["sent_part"] == "test"]}
    assert seen and not any(r.tobytes() in test_rows for X in seen for r in X)
    assert set(res["chosen"]) == {"a", "b", "c"} and all(0 <= res["per"]["protocol"][s] <= 1 for s in "abc")
    # inverting every held-out label changes the reported figures, never a choice
    flipped = JA.ragbench_adherence(_synthetic_ragbench(flip_test=True))
    assert flipped["chosen"] == res["chosen"] and flipped["final"] == res["final"]
    assert flipped["dev_loso"] == res["dev_loso"]
    assert flipped["per"]["protocol"] != res["per"]["protocol"]


class _StubChecker:
    """Features from a hash of the claim (deterministic), so the suites run without a model."""

    class config:  # noqa: N801 - mimics OfflineChecker.config
        model, window, top_k_sentences = "stub", 2, 3

    def features(self, pairs, cache=None):
        X = np.array([np.random.default_rng(int(hashlib.sha256(c.encode()).hexdigest()[:8], 16)).normal(
            size=len(FEATURES)) + (2.0 if "good" in c else 0.0) for c, _ in pairs])
        return X, [{"empty": False, "contradiction": False} for _ in pairs]


def _write_rc(folder, flip_domain=None):
    words = ["good", "fine", "bad", "poor", "good and fine", "tall", "short", "green", "blue", "red"]
    human, k = [], 0
    for d in ("d1", "d2", "d3"):
        for j in range(8):
            k += 1
            r1 = f"The {words[j % 10]} answer number {k} about {d}. It is {words[(j + 3) % 10]} indeed today."
            r2 = f"The {words[(j + 5) % 10]} reply number {k} about {d}. It is {words[(j + 1) % 10]} again."
            gt = f"The good answer number {k} about {d}. It is fine indeed today."
            for a in (0, 1):
                lab = ((j + a + k) % 5) - 2
                if d == flip_domain:
                    lab = -lab
                human.append({"instance_id": k, "dataset": d, "query": "q", "gt_answer": gt,
                              "model1": {"response": r1}, "model2": {"response": r2},
                              "correctness_label": lab, "completeness_label": lab, "overall_label": lab})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta_eval_human_labeled_dev.json").write_text(json.dumps(human))
    return {"ragchecker_human": {"folds": {d: [h["instance_id"] for h in human if h["dataset"] == d][::2]
                                           for d in ("d1", "d2", "d3")}}}


def test_ragchecker_choice_for_a_domain_ignores_that_domains_labels(tmp_path, monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    heads = JA.shipped_heads()
    splits = _write_rc(tmp_path / "a")
    res = JA.rc_suite(tmp_path / "a", splits, _StubChecker(), None, None, heads, {"full": 0.3, "lexical": 0.3})
    _write_rc(tmp_path / "b", flip_domain="d2")
    flipped = JA.rc_suite(tmp_path / "b", splits, _StubChecker(), None, None, heads, {"full": 0.3, "lexical": 0.3})
    assert flipped["chosen"]["d2"] == res["chosen"]["d2"]  # chosen on d1 + d3 only
    proto = "protocol (choice made on the other 4 domains)"
    assert flipped["rows"][proto]["per"]["d2"] == pytest.approx(-res["rows"][proto]["per"]["d2"])


SCHEMA_SUITE_KEYS = {"suite", "measure", "split", "out_of_sample", "value", "n", "baselines", "reference", "target"}


def test_judge_agreement_json_matches_the_judge_card_schema():
    data = json.loads(JA.JSON_PATH.read_text())
    assert set(data) - {"ppi_width_ratio", "ppi_width_ratio_note"} == {"version", "written", "protocol", "judges"}
    assert data["version"] == 1
    for metric, by_judge in data.get("ppi_width_ratio", {}).items():  # metric -> judge -> labels -> widths
        assert metric in ("adherence", "utilization") and by_judge, metric
        for cells in by_judge.values():
            assert set(cells) == {"50", "100"} and all(0 < c["ratio"] <= 1.1 and c["N"] > 100 for c in cells.values())
    assert len(data["written"]) == 10 and data["written"][4] == "-" and len(data["protocol"]) > 100
    assert "offline" in data["judges"]
    for jid, judge in data["judges"].items():
        assert set(judge) == {"extractor", "checker", "variant", "suites", "verdict"}, jid
        assert judge["suites"] and isinstance(judge["verdict"], str) and judge["verdict"].endswith(".")
        for s in judge["suites"]:
            assert set(s) == SCHEMA_SUITE_KEYS, s
            assert s["out_of_sample"] is True  # only out-of-sample figures are reported
            assert isinstance(s["value"], float) and isinstance(s["n"], int) and s["n"] > 0
            assert s["baselines"] and all(isinstance(v, float) for v in s["baselines"].values())
            assert isinstance(s["reference"], dict) and isinstance(s["target"], float)
    suites = {s["suite"] for s in data["judges"]["offline"]["suites"]}
    assert {"ragchecker_human", "wice", "ragbench_adherence", "trace_relevance"} <= suites
    assert MS.load_splits()["sha256"][:12] in data["protocol"]


def test_judge_agreement_skips_without_data(tmp_path, capsys):
    assert JA.main(["--data", str(tmp_path / "nope")]) == 0
    assert "skipped" in capsys.readouterr().out


class _CountingEncoder:
    """A stand-in sentence encoder: a fixed random vector per text, every text it encodes recorded."""

    def __init__(self):
        self.texts: list[str] = []

    def encode(self, texts, **_):
        self.texts += list(texts)
        seeds = [int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) for t in texts]
        return np.stack([np.random.default_rng(s).normal(size=8) for s in seeds]).astype(np.float32)


def test_meta_eval_embeds_each_sentence_once_and_a_second_run_nothing(tmp_path, monkeypatch):
    """The RAGBench features and the TRACe relevance suite share one embedding cache keyed by
    (model, text): the first run encodes each distinct sentence once across both, a second run
    (a new process's view of the same --cache folder, the feature files left out) encodes none."""
    from experiments.meta_eval import ja_ragbench as JR
    from ragsweep.corpus import embeddings as E
    from ragsweep.judge.offline import OfflineChecker
    from ragsweep.judge.ragas import Embedder

    enc, loads = _CountingEncoder(), []
    monkeypatch.setattr(E, "load_sentence_transformer", lambda *a, **k: (loads.append(a), enc)[1])
    folder = FIX / "ragbench"
    subsets = {}
    for s in ("covidqa", "hotpotqa", "msmarco"):
        ids = [str(r["id"]) for r in C.load_ragbench_subset(folder / s, None)]
        subsets[s] = {"dev": ids[::2], "test": ids[1::2]}

    def run():
        cache = C.open_cache(str(tmp_path / "cache"))
        checker, emb = OfflineChecker(threshold=0.5), Embedder(cache=cache)
        rb = JR.load_ragbench(folder, {"ragbench": {"subsets": subsets}}, checker, cache, None, None)
        tr = JR.trace_relevance(rb, cache, emb)
        return rb, tr, checker.stats["texts_encoded"] + emb.stats["encoded"]

    rb1, tr1, n1 = run()
    assert n1 == len(enc.texts) > 50 and len(set(enc.texts)) == len(enc.texts)  # each distinct text once
    shared = set(t for r in rb1["covidqa"]["rows"] for doc in r["documents_sentences"] for _, t in doc)
    assert shared & set(enc.texts)  # the trace suite's sentences overlap the checker's: encoded once
    loads.clear()
    rb2, tr2, n2 = run()
    assert n2 == 0 and len(enc.texts) == n1 and not loads  # nothing encoded, the model never loaded
    for s in rb1:
        np.testing.assert_array_equal(rb1[s]["f"].X, rb2[s]["f"].X)
    assert json.dumps(tr1, default=str) == json.dumps(tr2, default=str)


# -- judge_agreement --trained: the trained cross-encoder alone and stacked, same protocol, same items ----
def _with_trained(rb, p_of):
    """``rb`` with the column ``trained`` = logit(p_of(subset data)) appended to every subset's features."""
    for d in rb.values():
        d["f"] = d["f"].with_trained(p_of(d))
    return rb


def test_trained_column_reaches_the_ragbench_protocol(monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    # P = the sentence label itself: the trained judge ranks every held-out row perfectly
    rb = _with_trained(_synthetic_ragbench(), lambda d: d["y"].astype(float))
    off = JA.ragbench_adherence(rb)
    res = JA.ragbench_adherence(rb, JK.JUDGES["trained"], "trained", off)
    assert res["per"]["protocol"] == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert all(c[0] == "trained" for c in res["chosen"].values())
    assert set(res["boot"]) == {"trained - token overlap", "trained - offline protocol"}
    assert res["boot"]["trained - offline protocol"][0] == pytest.approx(
        1.0 - np.mean(list(off["per"]["protocol"].values())))
    # P = token overlap of the row's response (each of its sentences carries it): the min row equals the token row
    def overlap_p(d):
        for i, r in enumerate(d["rows"]):  # responses whose share of content words in the reference varies
            r["response"] = " ".join(["apple", "banana", "cherry", "grape", "lemon"][: i % 5 + 1])
            r["documents_sentences"] = [[["0a", "apple banana"]], [["1a", "cherry" if i % 3 else "melon"]]]
        tok = np.array([C.content_overlap(r["response"], C.ragbench_reference(r)) for r in d["rows"]])
        return tok[d["row"]] * 0.98 + 0.01

    res2 = JA.ragbench_adherence(_with_trained(_synthetic_ragbench(), overlap_p), JK.JUDGES["trained"], "trained")
    for s in "abc":
        assert 0.5 != res2["per"]["trained/min"][s] == pytest.approx(res2["per"]["token"][s])
    assert set(res2["boot"]) == {"trained - token overlap"}


def test_trained_column_leaves_the_offline_judge_unchanged(monkeypatch):
    """--trained unset or set: the offline judge's figures, choices and intervals are the same."""
    monkeypatch.setattr(JK, "B_BOOT", 20)
    plain = JA.ragbench_adherence(_synthetic_ragbench())
    rng = np.random.default_rng(5)
    withp = JA.ragbench_adherence(_with_trained(_synthetic_ragbench(), lambda d: rng.uniform(size=len(d["y"]))))
    for k in ("per", "chosen", "final", "boot", "dev_loso"):  # (json: NaN == NaN)
        assert json.dumps(withp[k]) == json.dumps(plain[k]), k


def test_trained_and_stacked_choices_never_read_held_out_rows(monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    seen = []
    for name in ("fit_head", "direct_head"):
        real = getattr(JK, name)
        monkeypatch.setattr(JK, name, lambda X, y, *a, _r=real, **k: (seen.append(X.copy()), _r(X, y, *a, **k))[1])

    def p_of(d):  # a noisy P that follows the labels of the data it is given (flipped or not: fixed here)
        return 1 / (1 + np.exp(-d["f"].X[:, 3]))

    for judge in ("trained", "stacked"):
        seen.clear()
        rb = _with_trained(_synthetic_ragbench(), p_of)
        res = JA.ragbench_adherence(rb, JK.JUDGES[judge], judge)
        test_rows = {r.tobytes() for d in rb.values() for r in d["f"].X[d["sent_part"] == "test"]}
        assert seen and not any(r.tobytes() in test_rows for X in seen for r in X), judge
        flipped = JA.ragbench_adherence(_with_trained(_synthetic_ragbench(flip_test=True), p_of), JK.JUDGES[judge], judge)
        assert flipped["chosen"] == res["chosen"] and flipped["final"] == res["final"], judge
        assert flipped["dev_loso"] == res["dev_loso"] and flipped["per"]["protocol"] != res["per"]["protocol"], judge


class _StubTrained:
    """A trained scorer without a model: P from a hash of the claim, higher for claims with "good"."""

    weights_sha256 = "stub"

    def __init__(self):
        self.calls = 0

    @property
    def cache_id(self):  # as TrainedChecker.cache_id: what the cached P is keyed by
        return {"checker": "trained", "weights_sha256": self.weights_sha256}

    def score_pairs(self, pairs, cache=None):
        self.calls += 1
        return [float(np.random.default_rng(int(hashlib.sha256(c.encode()).hexdigest()[:8], 16)).uniform(0, 0.6)
                      + (0.4 if "good" in c else 0.0)) for c, _ in pairs]


def _family_heads():
    stacked = dict(JA.shipped_heads()["full"])
    stacked = {**stacked, "features": [*stacked["features"], "trained"], "mean": [*stacked["mean"], 0.0],
               "scale": [*stacked["scale"], 1.0], "coef": [*stacked["coef"], 1.0]}
    return {"trained": {"features": ["trained"], "direct": True, "threshold": 0.5}, "stacked": stacked}


def test_trained_ragchecker_choice_for_a_domain_ignores_that_domains_labels(tmp_path, monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    heads, jheads = JA.shipped_heads(), _family_heads()
    answer = {"full": 0.3, "lexical": 0.3, "trained": 0.5, "stacked": 0.5}
    splits = _write_rc(tmp_path / "a")
    _write_rc(tmp_path / "b", flip_domain="d2")
    proto = "protocol (choice made on the other 4 domains)"
    stub = _StubTrained()
    for judge in ("trained", "stacked"):
        off = JA.rc_suite(tmp_path / "a", splits, _StubChecker(), None, None, heads, answer, stub)
        res = JA.rc_suite(tmp_path / "a", splits, _StubChecker(), None, None, jheads, answer, stub, JK.JUDGES[judge], judge, off)
        assert all(c[2] == judge for c in res["chosen"].values())
        assert set(res["boot"]) == {f"{judge} - token F1", f"{judge} - ROUGE-L F", f"{judge} - offline protocol"}
        off_b = JA.rc_suite(tmp_path / "b", splits, _StubChecker(), None, None, heads, answer, stub)
        flipped = JA.rc_suite(tmp_path / "b", splits, _StubChecker(), None, None, jheads, answer, stub,
                              JK.JUDGES[judge], judge, off_b)
        assert flipped["chosen"]["d2"] == res["chosen"]["d2"], judge  # chosen on d1 + d3 only
        assert flipped["rows"][proto]["per"]["d2"] == pytest.approx(-res["rows"][proto]["per"]["d2"])
    # the offline judge's rows do not depend on the trained column being there
    plain = JA.rc_suite(tmp_path / "a", splits, _StubChecker(), None, None, heads, answer)
    for k in ("rows", "chosen", "final", "boot"):  # (json: NaN == NaN)
        assert json.dumps(plain[k]) == json.dumps(off[k]), k


def test_trained_p_is_cached_by_weights_and_pairs(tmp_path):
    stub, pairs = _StubTrained(), [("a good claim", "ref"), ("another", "ref")]
    p1 = JK.trained_p(stub, pairs, tmp_path)
    p2 = JK.trained_p(stub, pairs, tmp_path)
    assert stub.calls == 1 and np.array_equal(p1, p2)  # the second read from the file
    stub.weights_sha256 = "other weights"
    JK.trained_p(stub, pairs, tmp_path)
    assert stub.calls == 2
    # a real checker's key is its whole identity: the same weights in another precision are scored afresh
    from ragsweep.judge.trained import TrainedChecker

    calls = []
    for prec in ("fp32", "bf16", "fp32"):
        ck = TrainedChecker(weights=str(tmp_path / "w.safetensors"), precision=prec)
        ck.score_pairs = lambda ps, prec=prec: calls.append(prec) or [0.5] * len(ps)
        JK.trained_p(ck, pairs, tmp_path)
    assert calls == ["fp32", "bf16"]
    f = JK.Feats(np.zeros((2, len(FEATURES))), np.zeros(2, bool), np.ones(2, bool)).with_trained(np.array([0.0, 1.0]))
    head = {"features": ["trained"], "direct": True}
    assert f.X.shape[1] == len(FEATURES) + 1
    np.testing.assert_allclose(f.probs(head), [1e-6, 1 - 1e-6])  # P itself, not capped by the contradiction rule
    assert list(f.labels(head, 0.5)) == [0.0, 1.0]


def test_trained_judges_json_and_markdown(monkeypatch):
    """The trained and stacked judges get judge-card entries (offline extractor, checker = judge) in the
    offline judge's schema, and a Markdown section each after the offline judge's tables."""
    monkeypatch.setattr(JK, "B_BOOT", 20)
    rb = _with_trained(_synthetic_ragbench(), lambda d: d["y"] * 0.8 + 0.1)
    off = JA.ragbench_adherence(rb)
    more = {j: {"rba": JA.ragbench_adherence(rb, JK.JUDGES[j], j, off)} for j in ("trained", "stacked")}
    splits = {"sha256": "0" * 64}
    data = JA.agreement_json(None, None, off, None, splits, more)
    assert data["judges"]["offline"] == JA.agreement_json(None, None, off, None, splits)["judges"]["offline"]
    for j in ("trained", "stacked"):
        e = data["judges"][j]
        assert set(e) == {"extractor", "checker", "variant", "suites", "verdict"} and e["checker"] == j
        (s,) = e["suites"]
        assert set(s) == SCHEMA_SUITE_KEYS and s["value"] == round(float(np.mean(list(more[j]["rba"]["per"]["protocol"].values()))), 3)
        assert "offline judge's protocol" in e["verdict"] and e["verdict"].endswith(".")
    md = JA.render(None, None, off, None, splits["sha256"], more)
    assert md.startswith(JA.render(None, None, off, None, splits["sha256"]))
    assert "# The trained judge" in md and "# The stacked judge" in md and "trained - offline protocol" in md
    named = JA.render(None, None, off, None, splits["sha256"], more, trained=("w.safetensors", "weights sha256 ab12, fp32"))
    assert named.startswith("# Out-of-sample agreement of the offline, trained and stacked judges (frozen splits)\n")
    assert ("`python -m experiments.meta_eval.judge_agreement --data ../shared/data --trained w.safetensors` "
            "(weights sha256 ab12, fp32) from `splits.json`") in named
    assert named.split("\n", 3)[3] == md.split("\n", 3)[3]  # only the title and the command differ


def test_trained_wice_rows_and_paired_intervals(monkeypatch):
    monkeypatch.setattr(JK, "B_BOOT", 20)
    splits, stub = MS.make(str(FIX)), _StubTrained()
    heads = {k: v for k, v in JA.shipped_heads().items() if k in ("full", "lexical")}
    off = JA.wice_suite(FIX / "wice", splits, _StubChecker(), None, None, heads, stub)
    res = JA.wice_suite(FIX / "wice", splits, _StubChecker(), None, None, _family_heads(), stub, JK.JUDGES["trained"],
                        "trained", off)
    assert list(res["select"]) == ["trained P"] and res["chosen"] == "trained P"  # P directly, nothing fitted on select
    assert list(res["test"]) == ["trained P", "protocol", "token overlap"]
    assert set(res["boot"]) == {"trained - token overlap", "trained - offline protocol"}
    d = res["boot"]["trained - offline protocol"][0]
    assert d == pytest.approx(res["test"]["protocol"] - off["test"]["protocol"])
    st = JA.wice_suite(FIX / "wice", splits, _StubChecker(), None, None, _family_heads(), stub, JK.JUDGES["stacked"],
                       "stacked", off)
    assert set(st["select"]) == {"ragbench-dev head, stacked", "WiCE-select head, stacked"}
    assert set(st["answer_threshold"]) == {"stacked"}


def test_trained_option_names_a_missing_or_bad_weights_file(tmp_path):
    args = ["--data", str(tmp_path), "--cache", "", "--model", "none", "--trained"]
    with pytest.raises(SystemExit, match="--trained .*nope.safetensors: no such file.*train_checker"):
        JA.main([*args, str(tmp_path / "nope.safetensors")])
    bad = tmp_path / "bad.safetensors"
    bad.write_text("not weights")
    with pytest.raises(SystemExit, match="--trained .*bad.safetensors: .*cannot read"):
        JA.main([*args, str(bad)])
