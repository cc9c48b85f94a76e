"""The NLI checker with a user's own model folder: found by path (absolute, ``~``, relative to the
launch directory) with the hub off, labels in the order of its ``id2label``, a clear error for a
path that holds no model, and a cache identity that changes when the folder's model does."""

from __future__ import annotations

import pytest

from ragsweep.judge.nli import NLIChecker, NLIModelError, folder_digest, local_folder

PAIRS = [("Paris is in France.", "Paris is a city in France."), ("x", "y")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from support.nli_model import tiny_nli_model

    return tiny_nli_model(tmp_path_factory.mktemp("nli") / "my-nli")


def _fake_model(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"w1")
    return folder


def test_a_folder_is_found_by_absolute_home_or_relative_path(tmp_path, monkeypatch):
    folder = _fake_model(tmp_path / "models" / "mine")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path / "models")
    for given in (str(folder), "~/models/mine", "mine", "./mine", "../models/mine/"):
        assert NLIChecker(model=given).config.model == str(folder), given
    assert NLIChecker(model="cross-encoder/nli-deberta-v3-base").config.model == "cross-encoder/nli-deberta-v3-base"


@pytest.mark.parametrize("given, says", [
    ("./no_such_model", "no folder {tmp}/no_such_model"),
    ("~/gone/model", "no folder {tmp}/gone/model"),
    ("/nonexistent/dir/model", "no folder /nonexistent/dir/model"),
    ("empty", "the folder {tmp}/empty holds no saved model (no config.json and no weights"),
    ("config_only", "the folder {tmp}/config_only holds no saved model (no weights"),
    ("a_file", "{tmp}/a_file is a file"),
])
def test_a_path_without_a_model_fails_at_build_naming_field_and_path(tmp_path, monkeypatch, given, says):
    (tmp_path / "empty").mkdir()
    (tmp_path / "config_only").mkdir()
    (tmp_path / "config_only" / "config.json").write_text("{}")
    (tmp_path / "a_file").write_text("x")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NLIModelError) as err:
        NLIChecker(model=given)
    msg = str(err.value)
    assert msg.startswith(f"evaluator.checker.model={given!r}: "), msg
    assert says.format(tmp=tmp_path) in msg, msg


def test_cache_id_changes_when_the_model_in_the_folder_changes(tmp_path):
    folder = _fake_model(tmp_path / "m")
    before = NLIChecker(model=str(folder)).cache_id
    assert before["files_sha256"] == folder_digest(folder)
    assert NLIChecker(model=str(folder)).cache_id == before  # stable
    (folder / "model.safetensors").write_bytes(b"w2")  # retrained into the same folder
    assert NLIChecker(model=str(folder)).cache_id != before
    big = folder / "model.safetensors"
    big.write_bytes(b"a" * (3 << 20))
    d1 = folder_digest(folder)
    big.write_bytes(b"a" * (3 << 20 - 1) + b"b")  # a change in the last MiB of a large file
    assert folder_digest(folder) != d1
    assert "files_sha256" not in NLIChecker(model="cross-encoder/nli-deberta-v3-base").cache_id
    assert local_folder("cross-encoder/nli-deberta-v3-base") is None


@pytest.mark.slow
def test_own_model_folder_loads_with_the_hub_off(model_dir, tmp_path, monkeypatch):
    from support.nli_model import tiny_nli_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.chdir(model_dir.parent)
    nli = NLIChecker(model=model_dir.name, device="cpu")  # relative to the launch directory
    assert nli.check_pairs(PAIRS) == ["Entailment", "Entailment"]
    assert nli.labels == ["Contradiction", "Entailment", "Neutral"]
    # the class order is the folder's id2label, not a fixed one
    other = tiny_nli_model(tmp_path / "other", winner=0, id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"})
    assert NLIChecker(model=str(other), device="cpu").check_pairs(PAIRS) == ["Entailment", "Entailment"]
    last = tiny_nli_model(tmp_path / "last", winner=2, id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"})
    assert NLIChecker(model=str(last), device="cpu").check_pairs(PAIRS) == ["Contradiction", "Contradiction"]
    # label_map overrides id2label
    remapped = NLIChecker(model=str(model_dir), device="cpu", label_map={0: "entailment", 1: "neutral", 2: "contradiction"})
    assert remapped.check_pairs(PAIRS) == ["Neutral", "Neutral"]
