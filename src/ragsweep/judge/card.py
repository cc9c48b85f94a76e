"""The judge card: which judge scored a run, and how well that judge agrees with people.

Every RAGChecker / TRACe / RAGAS number of a run comes from a judge (an extractor + a checker,
maybe an LLM). A number is only as good as the judge's agreement with human labels, so every run
and report carries this card::

    c = card(cfg.evaluator)            # a dict (JSON-able)
    tags(c)                            # MLflow tags ragsweep.judge.* (values <= 5000 chars)
    markdown(c)                        # the short judge_card.md artifact

The measured agreement is read from the versioned results file the meta-evaluation suites write,
``experiments/meta_eval/results/judge_agreement.json`` (schema: ``version``, ``written``,
``protocol``, ``judges: {judge id: {extractor, checker, variant, suites: [{suite, measure,
split, out_of_sample, value, n, baselines, reference, target}], verdict}}``). Where it is looked
for, first found wins: the ``agreement_path`` argument, the environment variable
``RAGSWEEP_JUDGE_AGREEMENT``, the file in the repository checkout this package runs from, and
the copy shipped inside the package (``ragsweep/judge/judge_agreement.json``). Judge ids: ``offline``
(offline extractor + offline checker), ``nli``, ``llm:<model>``; an entry is also found by its
extractor and checker names. Only out-of-sample figures are quoted as agreement; in-sample ones
are listed as such.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from importlib.metadata import PackageNotFoundError, version

ENV_VAR = "RAGSWEEP_JUDGE_AGREEMENT"
def _version() -> str:
    """ragsweep's installed version (the package metadata: no import of the package's face)."""
    try:
        return version("ragsweep")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        return "unknown"


PACKAGE_FILE = Path(__file__).with_name("judge_agreement.json")
REPO_FILE = Path(__file__).resolve().parents[3] / "experiments" / "meta_eval" / "results" / "judge_agreement.json"
TAG_LIMIT = 5000

NO_MEASUREMENT = "no measured agreement with people for this judge"
OFFLINE_CAVEAT = (
    "Out of sample, the offline judge agrees with people about as well as word overlap "
    "(token F1 / ROUGE-L between answer and response) does, so its RAGChecker/TRACe/RAGAS numbers "
    "are no better evidence than the baseline/* metrics logged beside them. Conclusions about "
    "generators need evaluator=llm with a strong model."
)
SMALL_LLM_CAVEAT = (
    "The bundled SmolLM2-135M judge only proves that the pipeline runs; use a strong model "
    "(e.g. server@evaluator.judge.server=external) for numbers you draw conclusions from."
)

# class name -> component name, for specs given as Hydra mappings
_CLASS_NAMES = {
    "OfflineExtractor": "offline", "LLMExtractor": "llm",
    "OfflineChecker": "offline", "NLIChecker": "nli", "LLMChecker": "llm",
}


def _plain(value: Any) -> Any:
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return value


def _component(spec: Any) -> tuple[str | None, dict[str, Any]]:
    """(name, options) of an extractor/checker spec: a name, a mapping with ``_target_``, or an
    object built from one."""
    spec = _plain(spec)
    if spec is None:
        return None, {}
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, Mapping):
        target = str(spec.get("_target_") or "")
        cls = target.rsplit(".", 1)[-1]
        opts = {k: v for k, v in spec.items() if k != "_target_"}
        return _CLASS_NAMES.get(cls, cls or None), opts
    cls = type(spec).__name__
    config = getattr(spec, "config", None)
    try:
        from dataclasses import asdict

        opts = asdict(config) if config is not None else {}
    except TypeError:
        opts = {}
    return _CLASS_NAMES.get(cls, getattr(spec, "name", cls)), opts


def _judge_model(judge: Any) -> str | None:
    """The judge model's name from ``evaluator.judge`` (model, else the server's model/alias/path)."""
    judge = _plain(judge)
    if not isinstance(judge, Mapping):
        return getattr(judge, "model_name", None) if judge is not None else None
    if judge.get("model"):
        return str(judge["model"])
    server = _plain(judge.get("server"))
    if isinstance(server, Mapping):
        for key in ("model", "model_alias", "model_path", "model_name"):
            if server.get(key):
                return str(server[key])
    elif server is not None:
        return getattr(server, "model_name", None)
    return None


def _offline_thresholds(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The offline checker's Entailment thresholds: the configured ones, else the fitted ones of
    its parameters file (read, no model loaded)."""
    out = {"threshold": opts.get("threshold"), "answer_threshold": opts.get("answer_threshold")}
    if out["threshold"] is not None and out["answer_threshold"] is not None:
        return out
    try:
        from ragsweep.judge.offline import PARAMS_PATH

        path = Path(opts["params"]) if opts.get("params") else PARAMS_PATH
        head = json.loads(path.read_text())["models"]["lexical" if opts.get("model") == "none" else "full"]
        if out["threshold"] is None:
            out["threshold"] = float(head["threshold"])
        if out["answer_threshold"] is None:
            out["answer_threshold"] = float(head.get("answer_threshold", head["threshold"]))
        out["fitted"] = True
    except (OSError, KeyError, ValueError, TypeError):  # a card never fails a run
        pass
    return out


def judge_id(extractor: str | None, checker: str | None, model: str | None) -> str:
    if checker == "llm" or extractor == "llm":
        return f"llm:{model or 'default'}"
    if checker == "nli":
        return "nli"
    if extractor == "offline" and checker == "offline":
        return "offline"
    return f"{extractor}+{checker}"


def agreement_file(agreement_path: str | os.PathLike | None = None) -> Path | None:
    """The judge-agreement results file in force (see the module doc); None when none exists."""
    for p in (agreement_path, os.environ.get(ENV_VAR) or None, REPO_FILE, PACKAGE_FILE):
        if p and Path(p).is_file():
            return Path(p)
    return None


def load_agreement(agreement_path: str | os.PathLike | None = None) -> tuple[dict[str, Any], Path | None]:
    """The results file's content and path; an empty one (``judges: {}``) when missing or unreadable."""
    path = agreement_file(agreement_path)
    if path is None:
        return {"version": None, "judges": {}}, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"version": None, "judges": {}, "error": f"{path}: {exc}"}, path
    if not isinstance(data, dict) or not isinstance(data.get("judges", {}), Mapping):
        return {"version": None, "judges": {}, "error": f"{path}: not a judge-agreement file"}, path
    data.setdefault("judges", {})
    return data, path


def _find(judges: Mapping[str, Any], jid: str, extractor: str | None, checker: str | None) -> tuple[str, dict] | None:
    if isinstance(judges.get(jid), Mapping):
        return jid, dict(judges[jid])
    if jid.startswith("llm:"):
        return None  # an LLM judge is matched by its model only
    for key, entry in judges.items():
        if isinstance(entry, Mapping) and entry.get("extractor") == extractor and entry.get("checker") == checker:
            return key, dict(entry)
    return None


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, (int, float)):
        return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:g}"
    return str(v)


def suite_line(s: Mapping[str, Any]) -> str:
    """One suite result in a sentence: value, measure, split, sample, baselines, references."""
    where = "out of sample" if s.get("out_of_sample") else "IN SAMPLE (tuned on these data)"
    line = f"{s.get('suite')}: {s.get('measure')} {_num(s.get('value'))} ({s.get('split')}; {where}; n={_num(s.get('n'))})"
    extras = []
    if s.get("baselines"):
        extras.append("word overlap " + ", ".join(f"{k} {_num(v)}" for k, v in s["baselines"].items()))
    if s.get("reference"):
        extras.append("reference " + ", ".join(f"{k} {_num(v)}" for k, v in s["reference"].items()))
    if s.get("target") is not None:
        extras.append(f"target {_num(s['target'])}")
    return line + ("; " + "; ".join(extras) if extras else "")


def card(evaluator_cfg: Mapping[str, Any] | Any, agreement_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The judge card of an evaluator config (``cfg.evaluator``; a mapping or DictConfig)."""
    cfg = _plain(evaluator_cfg) or {}
    if not isinstance(cfg, Mapping):
        cfg = {}
    name = cfg.get("name")
    ext_name, ext_opts = _component(cfg.get("extractor"))
    chk_name, chk_opts = _component(cfg.get("checker"))
    judge_cfg = _plain(cfg.get("judge"))
    data, path = load_agreement(agreement_path)
    out: dict[str, Any] = {
        "evaluator": name,
        "ragsweep_version": _version(),
        "agreement_file": str(path) if path else None,
        "agreement_file_version": data.get("version"),
        "agreement_written": data.get("written"),
        "protocol": data.get("protocol"),
    }
    if name == "none" or (ext_name is None and chk_name is None):
        out.update(judge_id=None, extractor=None, checker=None, model=None, models={}, thresholds={},
                   agreement=None, statement="No judge: this run has no evaluator metrics.")
        return out

    model = _judge_model(judge_cfg) if (ext_name == "llm" or chk_name == "llm" or judge_cfg) else None
    models: dict[str, Any] = {}
    thresholds: dict[str, Any] = {}
    if model:
        models["judge"] = model
    if chk_name == "offline":
        models["checker_features"] = chk_opts.get("model", "minilm")
        thresholds.update(_offline_thresholds(chk_opts))
    elif chk_name == "nli":
        models["checker"] = chk_opts.get("model")
        thresholds["label"] = "argmax of the NLI classes"
    elif chk_name == "llm":
        thresholds["label"] = "the judge's label (Entailment / Neutral / Contradiction)"
    if cfg.get("ragas") and not judge_cfg:
        thresholds["ragas_context_threshold"] = cfg.get("context_threshold")
    jid = judge_id(ext_name, chk_name, model if (ext_name == "llm" or chk_name == "llm") else None)

    found = _find(data.get("judges") or {}, jid, ext_name, chk_name)
    agreement = None
    lines: list[str] = []
    if found is not None:
        key, entry = found
        suites = [s for s in entry.get("suites") or [] if isinstance(s, Mapping)]
        agreement = {
            "judge": key,
            "variant": entry.get("variant"),
            "verdict": entry.get("verdict"),
            "suites": suites,
            "out_of_sample": [suite_line(s) for s in suites if s.get("out_of_sample")],
            "in_sample": [suite_line(s) for s in suites if not s.get("out_of_sample")],
        }
        if entry.get("verdict"):
            verdict = str(entry["verdict"]).strip()
            lines.append(verdict[:1].upper() + verdict[1:] + ("" if verdict.endswith(".") else "."))
        if agreement["out_of_sample"]:
            lines.append("Measured agreement with human labels, out of sample: " + "; ".join(agreement["out_of_sample"]) + ".")
        else:
            lines.append(f"{NO_MEASUREMENT} out of sample (only in-sample figures exist).")
    else:
        lines.append(f"{NO_MEASUREMENT} ({jid}).")
    if jid == "offline":
        lines.append(OFFLINE_CAVEAT)
    if model and "smollm2" in model.lower():
        lines.append(SMALL_LLM_CAVEAT)
    out.update(
        judge_id=jid,
        extractor={"name": ext_name, **{k: v for k, v in ext_opts.items() if not isinstance(v, Mapping)}},
        checker={"name": chk_name, **{k: v for k, v in chk_opts.items() if not isinstance(v, Mapping)}},
        model=model,
        models=models,
        thresholds=thresholds,
        trace_mode=cfg.get("trace_mode"),
        agreement=agreement,
        statement=" ".join(lines),
    )
    return out


def _cut(text: str, limit: int = TAG_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def tags(c: Mapping[str, Any]) -> dict[str, str]:
    """MLflow tags ``ragsweep.judge.*`` of a card, every value a string of at most 5000 chars."""
    ag = c.get("agreement") or {}
    raw = {
        "id": c.get("judge_id") or "none",
        "evaluator": c.get("evaluator"),
        "extractor": json.dumps(c.get("extractor"), sort_keys=True, default=str),
        "checker": json.dumps(c.get("checker"), sort_keys=True, default=str),
        "model": c.get("model") or "",
        "models": json.dumps(c.get("models") or {}, sort_keys=True, default=str),
        "thresholds": json.dumps(c.get("thresholds") or {}, sort_keys=True, default=str),
        "ragsweep_version": c.get("ragsweep_version"),
        "agreement": " | ".join(ag.get("out_of_sample") or []) or NO_MEASUREMENT,
        "agreement_source": f"{c.get('agreement_file')} (version {c.get('agreement_file_version')}, "
                            f"written {c.get('agreement_written')})",
        "statement": c.get("statement") or "",
    }
    return {f"ragsweep.judge.{k}": _cut("" if v is None else str(v)) for k, v in raw.items()}


def markdown(c: Mapping[str, Any]) -> str:
    """The ``judge_card.md`` artifact: a short page a reader sees beside the numbers."""
    lines = ["# Judge card", ""]
    if not c.get("judge_id"):
        return "\n".join(lines + [c.get("statement") or "No judge.", ""])
    ext, chk = c.get("extractor") or {}, c.get("checker") or {}
    lines += [
        f"**{c.get('statement')}**",
        "",
        f"- judge: `{c['judge_id']}` (evaluator `{c.get('evaluator')}`, ragsweep {c.get('ragsweep_version')})",
        f"- extractor: `{ext.get('name')}`; checker: `{chk.get('name')}`",
        f"- model(s): {', '.join(f'{k}: `{v}`' for k, v in (c.get('models') or {}).items()) or 'none'}",
        f"- thresholds: {', '.join(f'{k}: {_num(v)}' for k, v in (c.get('thresholds') or {}).items()) or 'none'}",
    ]
    ag = c.get("agreement")
    lines += ["", "## Agreement with human labels", ""]
    if ag and (ag.get("out_of_sample") or ag.get("in_sample")):
        if ag.get("variant"):
            lines.append(f"Variant measured: {ag['variant']}.")
            lines.append("")
        lines += [f"- {s}" for s in ag.get("out_of_sample") or []]
        lines += [f"- {s}" for s in ag.get("in_sample") or []]
    else:
        lines.append(f"{NO_MEASUREMENT}.")
    if c.get("in_domain"):  # set by ragsweep-label / ragsweep-report once a person labelled answers (issue 25)
        lines += ["", "In-domain, against your own human labels on this sweep's answers (ragsweep-label):", ""]
        lines += [f"- {s}" for s in c["in_domain"]]
    if c.get("protocol"):
        lines += ["", f"Protocol: {c['protocol']}"]
    src = c.get("agreement_file")
    lines += ["", f"Source: `{src}` (version {c.get('agreement_file_version')}, written {c.get('agreement_written')})."
              if src else "Source: no judge-agreement file found.", ""]
    return "\n".join(lines)


def headline(c: Mapping[str, Any]) -> dict[str, Any] | None:
    """The card's one figure: its first out-of-sample agreement that has an interval (a Pearson
    correlation, by Fisher's z; an AUROC, by Hanley and McNeil's variance with the classes taken as
    even), with its 95% interval and its best word-overlap baseline; None when there is none."""
    for s in (c.get("agreement") or {}).get("suites") or []:
        measure, value, n = str(s.get("measure") or ""), s.get("value"), s.get("n")
        if not (s.get("out_of_sample") and isinstance(value, (int, float)) and isinstance(n, int) and n > 4):
            continue
        scale = 100.0 if "x100" in measure or value > 1 else 1.0
        v = value / scale
        if "pearson" in measure.lower() and abs(v) < 1:
            z, se = math.atanh(v), 1.0 / math.sqrt(n - 3)
            low, high = math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se)
            name = "Pearson"
        elif "auroc" in measure.lower() and 0 < v < 1:
            n1 = n2 = n / 2.0
            q1, q2 = v / (2 - v), 2 * v * v / (1 + v)
            se = math.sqrt((v * (1 - v) + (n1 - 1) * (q1 - v * v) + (n2 - 1) * (q2 - v * v)) / (n1 * n2))
            low, high, name = max(0.0, v - 1.96 * se), min(1.0, v + 1.96 * se), "AUROC"
        else:
            continue
        base = max((b for b in (s.get("baselines") or {}).items() if isinstance(b[1], (int, float))),
                   key=lambda kv: kv[1], default=None)
        return {"suite": s.get("suite"), "measure": name, "value": value, "low": low * scale, "high": high * scale,
                "n": n, "baseline": base}
    return None


def sentence(c: Mapping[str, Any], card_path: str | None = None) -> str:
    """The summary's ``judge:`` line, one sentence: which judge, its agreement with people in one
    figure with its interval, what that means for this run's numbers, and where the full card is."""
    where = f"; full card: {card_path}" if card_path else "; full card: judge_card.md in the run's artifacts"
    jid = c.get("judge_id")
    if not jid:
        return "judge: none, so this run has no judge metrics" + where
    head = headline(c)
    if head is None:
        return (f"judge: {jid}, with no measured agreement with people, so read its scores as unvalidated "
                f"(ragsweep-label measures it on your own answers){where}")
    fig = f"{head['measure']} {_num(round(head['value'], 3))} [{head['low']:.3g}, {head['high']:.3g}]"
    said = f"judge: {jid} agrees with people at {fig} ({head['suite']}, n={head['n']}, out of sample)"
    base = head["baseline"]
    if base is not None and head["low"] <= base[1]:
        meaning = (f", no better than word overlap ({base[0]} {_num(base[1])}), so read its scores as a smoke test, "
                   "not as evidence about the systems")
    elif base is not None:
        meaning = f", above word overlap ({base[0]} {_num(base[1])}), so it can rank systems whose intervals separate"
    else:
        meaning = ", so differences smaller than that disagreement may be the judge's, not the systems'"
    return said + meaning + where


__all__ = ["NO_MEASUREMENT", "OFFLINE_CAVEAT", "agreement_file", "card", "headline", "judge_id", "load_agreement",
           "markdown", "sentence", "tags"]
