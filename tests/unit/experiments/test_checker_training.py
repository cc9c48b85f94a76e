"""The trained checker's data builder and training script on tiny fixtures (no download, no
evaluation data beyond the meta-eval fixtures)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from support import FIXTURES, ROOT
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import checker_data as D  # noqa: E402
from experiments.meta_eval import train_checker as T  # noqa: E402

FIX = FIXTURES / "meta_eval" / "checker"


def test_readers_parse_each_source_format():
    vc = list(D.read_vitaminc(FIX / "src" / "vitaminc_task.json"))
    assert [r["label"] for r in vc] == [1, 0, 0]  # True / False / Neither; the row without a claim skipped
    assert vc[0]["claim"] == "Lake Ora covers 12 square kilometres." and vc[0]["premise"].startswith("Lake Ora: ")
    qa = list(D.read_halueval_qa(FIX / "src" / "halueval_qa.jsonl"))
    assert [r["label"] for r in qa] == [1, 0, 1, 0]
    assert qa[0]["claim"] == "Who built the Blue Mill? the Harker family"
    mnli = list(D.read_docnli(FIX / "github" / "salesforce+DocNLI" / "Data" / "binary-MNLI" / "dev.txt", "mnli"))
    assert [(r["label"], r["source"]) for r in mnli] == [(1, "mnli"), (0, "mnli")]  # the malformed line skipped


def test_overlap_drops_copies_of_evaluation_texts():
    ov = D.Overlap(["The river Vale runs through the old town of Harbridge and meets the sea at Port Lin.",
                    "Who wrote the book about the Harbridge floods?"])
    assert ov.reason({"claim": "who wrote the book about the Harbridge floods", "premise": "x"}) == \
        "claim equals an evaluation text"
    assert ov.reason({"claim": "A new claim.", "premise": "The river Vale runs through the old town of Harbridge "
                      "and meets the sea at Port Lin. Nothing else."}) == "premise 8-grams"
    assert ov.reason({"claim": "The mill was built in 1820.", "premise": "The Harker family built it in 1820."}) is None


def test_build_counts_and_drops(tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(FIX / "src", cache / "src")  # the sources already fetched: no download
    rows, summary = D.build(list(D.SOURCES), cache, FIXTURES / "meta_eval", FIX / "github")
    s = summary["sources"]
    assert s["vitaminc"]["kept"] == 3 and s["halueval_qa"]["kept"] == 4 and s["mnli"]["kept"] == 2
    # FEVER fixture: one claim copied from WiCE, one premise copied from WiCE evidence, one clean row
    assert s["fever"]["kept"] == 1 and s["fever"]["dropped: claim equals an evaluation text"] == 1
    assert s["fever"]["dropped: premise 8-grams"] == 1
    assert summary["rows"] == len(rows) == 10
    again, _ = D.build(list(D.SOURCES), cache, FIXTURES / "meta_eval", FIX / "github")
    assert again == rows  # seeded order


def test_length_bucketed_batches_cover_an_epoch_once():
    lengths = [5, 50, 7, 48, 9, 46, 11, 44, 13, 42] * 30
    b = T.batches(lengths, 8, seed=1, epoch=0)
    flat = sorted(i for x in b for i in x)
    assert flat == list(range(len(lengths)))
    assert b == T.batches(lengths, 8, seed=1, epoch=0) and b != T.batches(lengths, 8, seed=1, epoch=1)
    # within a batch the lengths are close (sorted inside each pool)
    spread = sum(max(lengths[i] for i in x) - min(lengths[i] for i in x) for x in b) / len(b)
    assert spread < 20
    assert T.lr_factor(0, 100, 0.1) == pytest.approx(0.1) and T.lr_factor(100, 100, 0.1) == 0.0


@pytest.mark.slow
def test_training_checkpoints_resume_and_export(tmp_path, capsys):
    rows = [{"premise": "The bridge opened in 1932.", "claim": "The bridge opened in 1932.", "label": 1, "source": "t"},
            {"premise": "The bridge opened in 1932.", "claim": "The bridge closed in 1990.", "label": 0, "source": "t"}] * 4
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["--train", str(train), "--data", str(tmp_path / "none"), "--run", str(tmp_path / "run"),
              "--batch-size", "4", "--threads", "1", "--checkpoint-every", "2", "--max-length", "32"]
    assert T.main([*common, "--max-steps", "2"]) == 0
    assert (tmp_path / "run" / "last.pt").is_file()
    out = tmp_path / "w.safetensors"
    # the same pairs xz-compressed (as they travel to a GPU machine); a budget's file written with no
    # evaluation data there (its thresholds chosen later, with --init --max-steps 0), whole or absent
    import lzma

    xz = tmp_path / "train.jsonl.xz"
    xz.write_bytes(lzma.compress(train.read_bytes()))
    i = common.index("--train") + 1
    assert T.main([*common[:i], str(xz), *common[i + 1:], "--max-steps", "3", "--eval-at", "3", "--out", str(out)]) == 0
    assert "resumed at step 2" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["last.pt", "step_3.safetensors"]
    from ragsweep.judge.trained import TrainedChecker

    ck = TrainedChecker(weights=str(out))
    assert ck.meta["step"] == 3 and ck.meta["rows"] == 8
    p = ck.score_pairs([("The bridge opened in 1932.", "The bridge opened in 1932.")])
    assert 0.0 < p[0] < 1.0
    # a new run from that file: its weights, not the bundled model's fresh head; the file's steps counted on
    again = tmp_path / "again.safetensors"
    assert T.main([*common, "--run", str(tmp_path / "run2"), "--init", str(out), "--max-steps", "0", "--window", "2",
                   "--top-k-windows", "1", "--out", str(again)]) == 0
    ck2 = TrainedChecker(weights=str(again))
    assert ck2.meta["step"] == 3 and ck2.meta["init"]["file"] == "w.safetensors"
    assert ck2.meta["train"] == ck.meta["train"] and ck2.meta["rows"] == 8  # thresholds only: the file's training
    assert (ck2.meta["window"], ck2.meta["top_k_windows"]) == (2, 1)
    assert ck2.score_pairs([("The bridge opened in 1932.", "The bridge opened in 1932.")]) == pytest.approx(p, abs=1e-3)
