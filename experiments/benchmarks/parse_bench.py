"""Parsing benchmark for ``dataset=files`` (issue 36): which library parses each kind best, and
how the loader scales. Prints a Markdown report (experiments/results/parse_bench.md).

    python experiments/benchmarks/parse_bench.py libraries DOCS_DIR   # the comparison that chose the parsers
    python experiments/benchmarks/parse_bench.py folder [250 1000 4000]  # cold/warm/peak RSS of a mixed folder

``libraries``: every candidate on the same files: the RAGBench paper as PDF/HTML/DOCX (its text
is known: fidelity = 1 - word-level Levenshtein distance to it, normalised; "evidence" = share of
the paper's 197 ragbench_paper_qa chunks found in the output by ragsweep.corpus.dataset.locate without
its fuzzy step), and real manuals for speed (DOCS_DIR from experiments/benchmarks/own_docs/build.sh: Debian's
maint-guide, developers-reference and debian-reference PDFs, SQLite's HTML pages). Candidates
not installed (markitdown, PyMuPDF: ``pip install --target /tmp/benchlibs markitdown[pdf,docx]
pymupdf``) are skipped. ``folder``: N files copied from tests/fixtures/files (each copy edited so
its content hash differs), loaded cold and warm in a fresh process each, with its peak RSS.
"""

from __future__ import annotations

import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
if Path("/tmp/benchlibs").is_dir():
    sys.path.append("/tmp/benchlibs")
PAPER = ROOT / "tests" / "fixtures" / "files" / "paper"
W = re.compile(r"\w+")


def cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "?")
    return f"{model}, {os.cpu_count()} cores"


# -- candidates --------------------------------------------------------------------------------
def pdf_pypdfium2(p):
    from ragsweep.corpus.parse.pdf import parse
    r = parse(p)
    return r.text, len(r.pages)


def pdf_pypdf(p):
    import pypdf
    r = pypdf.PdfReader(str(p))
    return "\n\n".join(pg.extract_text() or "" for pg in r.pages), len(r.pages)


def pdf_pdfminer(p):
    from pdfminer.high_level import extract_text
    t = extract_text(str(p))
    return t, t.count("\f") or 1


def pdf_pymupdf(p):
    import pymupdf
    d = pymupdf.open(str(p))
    return "\n\n".join(pg.get_text() for pg in d), len(d)


def _markitdown(p):
    from markitdown import MarkItDown
    return MarkItDown().convert(str(p)).text_content


def html_lxml(p):
    from ragsweep.corpus.parse.html import parse
    return parse(p).text, 1


def html_bs4(p):
    from bs4 import BeautifulSoup
    s = BeautifulSoup(p.read_bytes(), "lxml")
    for t in s(["script", "style", "nav", "header", "footer"]):
        t.decompose()
    return s.get_text("\n"), 1


def html_trafilatura(p):
    import trafilatura
    return trafilatura.extract(p.read_text(encoding="utf-8", errors="replace"), include_tables=True, favor_recall=True) or "", 1


def html_readability(p):
    from bs4 import BeautifulSoup
    from readability import Document
    return BeautifulSoup(Document(p.read_text(encoding="utf-8", errors="replace")).summary(), "lxml").get_text("\n"), 1


def docx_python_docx(p):
    from ragsweep.corpus.parse.docx import parse
    return parse(p).text, 1


def docx_mammoth(p):
    import mammoth
    with open(p, "rb") as fh:
        return mammoth.extract_raw_text(fh).value, 1


CANDIDATES = {
    "pdf": {"pypdfium2 (chosen)": pdf_pypdfium2, "pypdf": pdf_pypdf, "pdfminer.six": pdf_pdfminer,
            "PyMuPDF (AGPL)": pdf_pymupdf, "markitdown": lambda p: (_markitdown(p), 1)},
    "html": {"lxml walk (chosen)": html_lxml, "BeautifulSoup get_text": html_bs4, "trafilatura": html_trafilatura,
             "readability-lxml": html_readability, "markitdown": lambda p: (_markitdown(p), 1)},
    "docx": {"python-docx (chosen)": docx_python_docx, "mammoth": docx_mammoth, "markitdown": lambda p: (_markitdown(p), 1)},
}


def words(t):
    return [w.lower() for w in W.findall(t)]


def fidelity(ref_words, out):
    from rapidfuzz.distance import Levenshtein
    return 1 - Levenshtein.normalized_distance(ref_words, words(out))


def evidence(out, chunks):
    from ragsweep.corpus.dataset.locate import DocumentIndex, locate
    idx = DocumentIndex(out)
    return sum(1 for c in chunks if (f := locate(c, idx, threshold=1.01)) is not None and f[2] != "fuzzy") / len(chunks)


def libraries(docs: Path) -> None:
    from ragsweep.corpus.dataset.loaders import BUILTIN, read_json
    from ragsweep.corpus.dataset.longdoc import RagbenchPaperLongDoc

    ref = RagbenchPaperLongDoc(split="none").load().documents[0].text
    ref_words = words(ref)
    chunks = [str(v) for v in read_json(str(BUILTIN / "ragbench_paper_qa" / "ragbench_paper_qa.json"))["corpus"].values()]
    speed = {"pdf": sorted(docs.glob("*.pdf")), "html": sorted(docs.glob("*.html"))[:40],
             "docx": sorted(docs.glob("*.docx"))}
    print(f"## Parsers compared ({cpu()}; one process)\n")
    print("fidelity: 1 - normalised word-level edit distance between the output and the paper's known text; "
          "evidence: share of its 197 ragbench_paper_qa chunks found exactly, up to whitespace or up to "
          "punctuation/case; speed over real manuals (files below), text = characters out.\n")
    for kind, cands in CANDIDATES.items():
        files = speed[kind] or [PAPER / f"ragbench_paper.{kind}"]
        print(f"### {kind.upper()}: the paper, and {len(files)} real file(s) for speed "
              f"({', '.join(f.name for f in files[:4])}{', ...' if len(files) > 4 else ''})\n")
        print("| library | fidelity | evidence | paper s | files/s | pages/s | MB text/s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, fn in cands.items():
            try:
                t0 = time.perf_counter()
                out, _ = fn(PAPER / f"ragbench_paper.{kind}")
                paper_s = time.perf_counter() - t0
            except ImportError:
                print(f"| {name} | not installed | | | | | |")
                continue
            fid, ev = fidelity(ref_words, out), evidence(out, chunks)
            t0, pages, chars = time.perf_counter(), 0, 0
            for f in files:
                text, n = fn(f)
                pages, chars = pages + n, chars + len(text)
            dt = time.perf_counter() - t0
            pg = f"{pages / dt:.1f}" if kind == "pdf" else "-"
            print(f"| {name} | {fid:.4f} | {ev:.3f} | {paper_s:.2f} | {len(files) / dt:.1f} | {pg} | {chars / 1e6 / dt:.2f} |")
        print()


# -- the folder --------------------------------------------------------------------------------
def make_folder(root: Path, n: int) -> None:
    src = [p for p in sorted((ROOT / "tests" / "fixtures" / "files").rglob("*")) if p.is_file() and p.name != "README.md"]
    for i in range(n):
        p = src[i % len(src)]
        dest = root / f"d{i // 100:03d}" / f"{i:05d}-{p.name}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = p.read_bytes()
        if p.suffix in (".md", ".txt", ".html") and data:
            data += f"\n\ncopy {i}\n".encode()
        elif p.suffix == ".pdf" and p.name not in ("truncated.pdf",):
            data += f"\n% copy {i}\n".encode()  # after %%EOF: readers ignore it, the hash changes
        dest.write_bytes(data)
    old = time.time() - 60
    for p in root.rglob("*"):
        os.utime(p, (old, old))


CHILD = """
import json, resource, sys, time
sys.path.insert(0, {src!r})
from ragsweep.corpus.dataset.files import FilesDataset
t = time.perf_counter()
ds = FilesDataset(path={path!r}, cache_dir={cache!r}).load_corpus()
n = sum(1 for _ in ds.documents) if {stream} else len(ds.documents)
dt = time.perf_counter() - t
print(json.dumps({{"s": dt, "docs": n, "parsed_now": ds.stats["files_parsed_now"], "ledger": ds.stats["files_in_ledger"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""


def folder(sizes: list[int]) -> None:
    print(f"## A mixed folder parsed cold and warm ({cpu()})\n")
    print("Copies of tests/fixtures/files (PDF, HTML, DOCX, Markdown and the bad files), each edited so it "
          "is a new file to the cache; each load in a fresh process; cold = empty cache (parse every file, "
          "2 worker processes), warm = the same folder again; 'then stream' = the warm load plus reading every "
          "document back from the parse cache (what chunking does on a chunk-cache miss).\n")
    print("| files | size MB | cold s | files/s | warm s | warm + stream s | documents | ledger | peak RSS MB (main) | peak RSS MB (a worker) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root, cache = Path(tmp) / "docs", Path(tmp) / "cache"
            make_folder(root, n)
            mb = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6
            env = {**os.environ, "RAGSWEEP_FINGERPRINTS": str(Path(tmp) / "fp.json"), "RAGSWEEP_QUIET": "1"}

            def run(stream):
                code = CHILD.format(src=str(ROOT / "src"), path=str(root), cache=str(cache), stream=stream)
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
                if out.returncode:
                    raise SystemExit(out.stderr[-3000:])
                return json.loads(out.stdout.strip().splitlines()[-1])

            cold, warm, streamed = run(False), run(False), run(True)
            assert warm["parsed_now"] == 0 and streamed["parsed_now"] == 0
            print(f"| {n:,} | {mb:.1f} | {cold['s']:.1f} | {n / cold['s']:.0f} | {warm['s']:.2f} | {streamed['s']:.1f} | "
                  f"{cold['docs']:,} | {cold['ledger']:,} | {max(cold['rss_mb'], streamed['rss_mb']):.0f} | "
                  f"{cold['workers_rss_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "folder"
    if what == "libraries":
        libraries(Path(sys.argv[2]))
    else:
        folder([int(a) for a in sys.argv[2:]] or [250, 1000, 4000])
