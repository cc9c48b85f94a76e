"""Entailment labels from an NLI cross-encoder (sentence-transformers ``CrossEncoder``).

``model`` is any sentence-transformers/HF NLI cross-encoder: a hub name such as
``cross-encoder/nli-deberta-v3-base`` (needs the hub, or the model already in the local HF cache)
or a local folder (a saved ``CrossEncoder``, or an ``AutoModelForSequenceClassification`` saved
with its tokenizer by ``save_pretrained``), loaded without the hub. A folder is given as an
absolute path, ``~/...``, or a path relative to the directory ragsweep was launched from; it is
checked when the checker is built (a missing folder, or one without ``config.json`` and weights,
stops the run before any work, naming ``evaluator.checker.model`` and the path), and its
``cache_id`` carries a digest of its files, so a model retrained into the same folder is a new
checker (no stale cached verdicts). Each pair is scored as (premise = reference, hypothesis = claim), the NLI
convention, and labelled with the argmax class. The class order is read from the model's
``config.id2label`` (``entailment``/``neutral``/``contradiction`` in any order and case; a
two-class model's ``not_entailment``/``non_entailment`` reads as Neutral); ``label_map`` in the
config overrides it for models whose config says only ``LABEL_0``....

A pair longer than the model's ``max_length`` is truncated by the cross-encoder; such pairs are
counted in ``stats["truncated"]`` and logged, never cut silently.

The model is loaded on the first check, not at construction, so building the evaluator is cheap
and a fully cached rerun never loads it. A model that cannot be loaded raises
:class:`NLIModelError` naming ``evaluator.checker.model`` and the offline switch.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragsweep.errors import ConfigError
from ragsweep.judge.labels import ALIASES, ENTAILMENT, NOT_ENTAILMENT_ALIASES

log = logging.getLogger(__name__)

_NAMES = {**ALIASES, **NOT_ENTAILMENT_ALIASES}


class NLIModelError(ConfigError, ValueError):
    """The NLI model cannot be loaded, or its labels cannot be read (a ValueError too, so that a
    bad ``label_map`` in the YAML is reported like any other config value)."""


def label_order(id2label: Mapping[Any, str], model: str = "") -> list[str]:
    """Our label for each class index, from a model config's ``id2label``."""
    try:
        n = len(id2label)
        names = [str(id2label[i] if i in id2label else id2label[str(i)]) for i in range(n)]
    except (KeyError, TypeError):
        raise NLIModelError(f"evaluator.checker.model {model!r}: unreadable id2label {dict(id2label)!r}") from None
    out = []
    for name in names:
        lab = _NAMES.get(name.strip().lower())
        if lab is None:
            raise NLIModelError(
                f"evaluator.checker.model {model!r}: class name {name!r} in id2label {names} is not an NLI "
                f"label (entailment/neutral/contradiction); give evaluator.checker.label_map, e.g. "
                f"{{0: contradiction, 1: entailment, 2: neutral}}"
            )
        out.append(lab)
    if ENTAILMENT not in out:
        raise NLIModelError(f"evaluator.checker.model {model!r}: no entailment class in id2label {names}")
    return out


#: files of a saved model's weights, any of which makes a folder a model folder
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")


def _absolute(model: str) -> Path:
    """``model`` as a path: ``~`` expanded, a relative path read from the launch directory (Hydra
    runs jobs there: ``hydra.job.chdir: false``)."""
    return Path(os.path.abspath(os.path.expanduser(model)))


def _looks_like_path(model: str) -> bool:
    """A hub id is ``name`` or ``owner/name``; anything else with a separator is meant as a path."""
    return (model.startswith(("/", "~", "./", "../", ".\\", "..\\")) or os.path.isabs(model)
            or "\\" in model or model.count("/") > 1 or model.endswith("/"))


def local_folder(model: str) -> Path | None:
    """The absolute folder ``model`` names, checked to hold a saved model; None for a hub name.

    Raises :class:`NLIModelError` (naming ``evaluator.checker.model`` and the path) for a path
    that is missing, not a folder, or a folder without ``config.json`` and weights."""
    path = _absolute(model)
    if not path.exists():
        if _looks_like_path(model):
            raise NLIModelError(
                f"evaluator.checker.model={model!r}: no folder {path} (a relative path is read from the "
                f"directory ragsweep was launched from); give the folder of a saved NLI cross-encoder")
        return None  # a hub name such as cross-encoder/nli-deberta-v3-base
    if not path.is_dir():
        raise NLIModelError(f"evaluator.checker.model={model!r}: {path} is a file; give the folder that holds "
                            f"the model's config.json, weights and tokenizer")
    missing = [] if (path / "config.json").is_file() else ["config.json"]
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if missing:
        raise NLIModelError(
            f"evaluator.checker.model={model!r}: the folder {path} holds no saved model (no {' and no '.join(missing)}); "
            f"save one there with model.save_pretrained(folder) and tokenizer.save_pretrained(folder)")
    return path


def folder_digest(path: Path, edge: int = 1 << 20) -> str:
    """sha256 over a model folder's files: names, sizes and contents (a large file's first and last
    MiB only, so a multi-GB model is fingerprinted in milliseconds)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.relative_to(path).parts):
        size = f.stat().st_size
        h.update(f"{f.relative_to(path).as_posix()}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= 2 * edge:
                h.update(fh.read())
            else:
                h.update(fh.read(edge))
                fh.seek(size - edge)
                h.update(fh.read(edge))
    return h.hexdigest()[:16]


class NLIChecker:
    """Claim-vs-reference labels from an NLI cross-encoder (see the module doc)."""

    @dataclass
    class Config:
        model: str = "cross-encoder/nli-deberta-v3-base"
        device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
        batch_size: int = 32
        max_length: Any = None  # int | None: the model's own
        label_map: Any = None  # {index: label name}, overrides the model's id2label

        def __post_init__(self) -> None:
            if not isinstance(self.model, str) or not self.model:
                raise ValueError(f"evaluator.checker.model must be a model name or path, got {self.model!r}")
            folder = local_folder(self.model)
            if folder is not None:
                self.model = str(folder)
            if not isinstance(self.device, str) or not (
                self.device in ("auto", "cpu", "mps") or self.device.startswith("cuda")
            ):
                raise ValueError(f"evaluator.checker.device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
            if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
                raise ValueError(f"evaluator.checker.batch_size must be an integer >= 1, got {self.batch_size!r}")
            if self.max_length is not None and (
                isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 8
            ):
                raise ValueError(f"evaluator.checker.max_length must be an integer >= 8 or null, got {self.max_length!r}")
            if self.label_map is not None:
                try:
                    from omegaconf import DictConfig, OmegaConf

                    if isinstance(self.label_map, DictConfig):
                        self.label_map = OmegaConf.to_container(self.label_map)
                except ImportError:  # pragma: no cover
                    pass
                if not isinstance(self.label_map, Mapping):
                    raise ValueError(f"evaluator.checker.label_map must be a mapping index -> label, got {self.label_map!r}")
                self.label_map = {int(k): str(v) for k, v in self.label_map.items()}
                label_order(self.label_map, self.model)  # fail now on a bad name

    name = "nli"

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.checker")
        self._model: Any = None
        self._labels: list[str] | None = None
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"NLIChecker({self.config})"

    @property
    def cache_id(self) -> dict[str, Any]:
        cfg = asdict(self.config)
        cfg.pop("device")
        cfg.pop("batch_size")
        if Path(cfg["model"]).is_dir():  # a local folder: its files, so a retrained model is a new checker
            cfg["files_sha256"] = folder_digest(Path(cfg["model"]))
        return {"checker": "nli", **cfg}

    def load(self) -> Any:
        """Load the cross-encoder (once) and read its label order."""
        if self._model is not None:
            return self._model
        cfg = self.config
        device = cfg.device
        if device == "auto":  # cuda when torch sees a GPU, unless a vLLM server of the run shares it
            from ragsweep.rag.devices import resolve

            device = resolve(device, "evaluator.checker.device")
        try:
            from sentence_transformers import CrossEncoder

            kwargs: dict[str, Any] = {"device": device}
            if cfg.max_length is not None:
                kwargs["max_length"] = cfg.max_length
            model = CrossEncoder(cfg.model, **kwargs)
        except Exception as exc:  # noqa: BLE001 - OSError, HF hub errors, ValueError ...
            offline = os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True") or os.environ.get(
                "TRANSFORMERS_OFFLINE"
            ) in ("1", "true", "True")
            if Path(cfg.model).is_dir():
                hint = (f"the local folder {cfg.model} does not load as a sequence-classification model with "
                        f"its tokenizer (save both there with save_pretrained)")
            elif offline:
                hint = ("the hub is switched off (HF_HUB_OFFLINE=1) and the model is not in the local HF cache, "
                        f"nor a folder {_absolute(cfg.model)}: download it once where the hub is reachable, or "
                        "give a local folder")
            else:
                hint = "check the name, or give a local folder with a saved cross-encoder"
            msg = " ".join(str(exc).split())[:300]
            raise NLIModelError(
                f"evaluator.checker.model: cannot load the NLI cross-encoder {cfg.model!r}: {hint} "
                f"({type(exc).__name__}: {msg})"
            ) from None
        id2label = cfg.label_map or getattr(getattr(model, "config", None), "id2label", None)
        if id2label is None:
            id2label = getattr(model.model.config, "id2label", None)
        if not id2label:
            raise NLIModelError(f"evaluator.checker.model {cfg.model!r}: the model config has no id2label; give label_map")
        self._labels = label_order(id2label, cfg.model)
        self._model = model
        return model

    @property
    def labels(self) -> list[str]:
        self.load()
        assert self._labels is not None
        return self._labels

    def check(self, claims: Sequence[str], reference: str) -> list[str]:
        return self.check_pairs([(c, reference) for c in claims])

    def check_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """Argmax NLI label of every (claim, reference) pair."""
        if not pairs:
            return []
        import numpy as np

        model = self.load()
        inputs = [(str(ref), str(claim)) for claim, ref in pairs]  # premise, hypothesis
        self._count_truncated(model, inputs)
        scores = model.predict(inputs, batch_size=self.config.batch_size, convert_to_numpy=True,
                               show_progress_bar=False)
        scores = np.asarray(scores)
        if scores.ndim != 2 or scores.shape[1] != len(self.labels):
            raise NLIModelError(
                f"evaluator.checker.model {self.config.model!r}: expected {len(self.labels)} class scores per "
                f"pair, got an array of shape {scores.shape}"
            )
        self.stats["pairs"] += len(pairs)
        return [self.labels[int(i)] for i in scores.argmax(axis=1)]

    def _count_truncated(self, model: Any, inputs: list[tuple[str, str]]) -> None:
        tok = getattr(model, "tokenizer", None)
        limit = getattr(model, "max_length", None) or getattr(tok, "model_max_length", None)
        if tok is None or not limit or limit > 100_000:
            return
        try:
            enc = tok([p for p, _ in inputs], [h for _, h in inputs], truncation=False)
        except Exception:  # noqa: BLE001 - counting is best effort
            return
        n = sum(1 for ids in enc["input_ids"] if len(ids) > limit)
        if n:
            self.stats["truncated"] += n
            log.warning(
                "NLI checker: %d of %d (reference, claim) pairs exceed the model's %d tokens and are "
                "truncated by the cross-encoder", n, len(inputs), limit,
            )


__all__ = ["NLIChecker", "NLIModelError", "folder_digest", "label_order", "local_folder"]
