"""What several benchmark scripts share (a library module, not a script: no script imports another
one). A script in this folder imports it by its bare name, ``from common import cpu_line``: Python
puts the running script's folder on sys.path.

- :func:`machine`, :func:`cpu_line`: the line that says which machine a figure came from;
- :func:`run_once`: one fresh ``ragsweep`` process, timed, with its stage seconds (the default-run
  and generation benchmarks time the same run the same way);
- :func:`first_documents`: the first documents of a JSONL corpus;
- :func:`question_responder`, :data:`QUESTIONS_CORPORA`, :data:`QUESTIONS_OUT`: the generated
  question sets' sentence-copying drafts and where the sets are kept (questions benchmarks).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the corpora with human questions that the generated question sets are made from, and where they are kept
QUESTIONS_CORPORA = ("clapnq_longdoc", "ragbench_paper_longdoc")
QUESTIONS_OUT = ROOT / "experiments" / "results" / "questions_ranking"
PASSAGE = re.compile(r'Passage(?: [AB])? from "[^"]*":\n(.*?)(?=\n\n(?:Passage [AB] from|Reply with JSON))', re.S)


def cpu_model() -> str:
    """The CPU model lscpu names (machines of one kind differ), else what Python can tell."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:  # noqa: BLE001
        return platform.processor() or "unknown"


def machine() -> str:
    """CPU model, cores and load average now."""
    return f"{cpu_model()}, {os.cpu_count()} cores, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}"


def cpu_line() -> str:
    """The CPU model, its vector flags and the llama.cpp CPU variant this build loads here."""
    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.rag.generator.servers import cpu_backend, format_choice

    model = format_choice.machine()["cpu"]  # the CPU model auto's remembered choices are keyed by
    flags = cpu_backend.cpu_flags()
    vector = [f for f in ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                          "amx_tile", "amx_int8", "amx_bf16") if f in flags]
    code = ("import sys; sys.path.insert(0, %r); from ragsweep.rag.generator.servers import cpu_backend as c; "
            "print(c.describe(c.load()))" % str(ROOT / "src"))
    variant = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() or "?"
    from ragsweep.rag.generator.servers import llama_build

    patches = ", ".join(llama_build.build_record().get("patches") or []) or "none"
    return (f"CPU: {model}, {os.cpu_count()} logical cores; flags: {' '.join(vector)}; llama.cpp CPU variant: {variant}; "
            f"patches (scripts/build_llama_cpp.py): {patches}")


def run_once(cwd: Path, args: list[str]) -> tuple[float, dict[str, float], str]:
    """A fresh ``ragsweep`` process in ``cwd`` (its own cache there): wall seconds, the seconds of
    each stage from its ``time:`` line, and its stdout. Exits with ragsweep's output if it fails."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(cwd / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ragsweep.pipeline.cli", "-q", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"ragsweep failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("time: ")), "")
    stages = {name: float(sec) for name, sec in re.findall(r"(\w+) ([0-9.]+)s", line)}
    return wall, stages, proc.stdout


def first_documents(corpus: str | Path, n: int) -> list:
    """The first ``n`` documents of a JSONL corpus (``doc_id``, ``text``)."""
    from ragsweep.types import Document

    docs = []
    with open(corpus) as f:
        for line in f:
            o = json.loads(line)
            docs.append(Document(o["doc_id"], o["text"]))
            if len(docs) >= n:
                break
    return docs


def question_responder(body, index):  # noqa: ANN001 - the fake server's hook
    """Drafts for ``ragsweep-questions`` from tests/fake_openai_server.py (tests/ on sys.path): each
    draft copies a middle sentence of each passage it is shown (no language model)."""
    from fake_openai_server import ok

    user = body["messages"][-1]["content"]
    if user.startswith("Answer the question in one short sentence"):
        return ok("I don't know.")
    h = hashlib.sha256(user.encode()).hexdigest()[:8]
    if "does NOT answer" in user:
        return ok(json.dumps({"quotes": [], "question": f"What is the serial number of release {h}?", "answer": ""}))
    quotes = []
    for p in PASSAGE.findall(user):
        sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", p) if len(s.split()) >= 6 and "\n" not in s.strip()]
        if sents:
            quotes.append(sents[len(sents) // 2])
    words = re.findall(r"[A-Za-z]{6,}", " ".join(quotes)) or ["things"]
    return ok(json.dumps({"quotes": quotes, "question": f"How does {words[0].lower()} relate to {words[-1].lower()} ({h})?",
                          "answer": quotes[0] if quotes else ""}))
