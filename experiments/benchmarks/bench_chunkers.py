"""Documents per second of each chunking strategy against ``chunker=tokens`` on the same texts.

    python experiments/benchmarks/bench_chunkers.py [--rounds 5] [--out experiments/results/bench_chunkers]

Corpora (all shipped or in the repository, offline): ``clapnq_longdoc`` (60 documents, median
2,072 MiniLM tokens), the RAGBench paper's 8 section documents, and this repository's own Markdown
(README.md and docs/*.md: real headings). Size 300, each strategy's default overlap, no cache (the
chunking work itself). Rounds are interleaved (tokens, recursive, sentences, markdown, tokens, ...)
so a busy shared machine slows every strategy of a round alike; the ratio to ``tokens`` is taken
within each round and its median reported. ``semantic`` runs once per corpus with an empty
embedding cache: its time is MiniLM encoding every sentence once, reported beside MiniLM's own
sentences/s on the same sentences (the bound). Also: the chunking libraries measured for
``recursive`` (semantic-text-splitter, semchunk, chonkie) when importable, on clapnq_longdoc.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from common import cpu_model

ROOT = Path(__file__).resolve().parents[2]


def corpora() -> dict[str, list]:
    from ragsweep.corpus.dataset import ClapNQLongDoc, RagbenchPaperLongDoc
    from ragsweep.types import Document

    md = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {
        "clapnq_longdoc": list(ClapNQLongDoc().load().documents),
        "ragbench_paper_longdoc": list(RagbenchPaperLongDoc().load().documents),
        "repository markdown": [Document(str(p.relative_to(ROOT)), p.read_text()) for p in md],
    }


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def libraries(docs: list) -> dict[str, float]:
    """docs/s of the chunking libraries that count tokens by tokenizing each candidate piece."""
    from ragsweep.corpus.chunker import _backend

    tok = _backend("minilm")
    texts = [d.text for d in docs]
    out: dict[str, float] = {}
    try:
        from semantic_text_splitter import TextSplitter

        s = TextSplitter.from_huggingface_tokenizer(tok, capacity=300, overlap=60)
        out["semantic-text-splitter (chunk_indices)"] = len(texts) / timed(lambda: [s.chunk_indices(t) for t in texts])
    except ImportError:
        pass
    try:
        import semchunk

        c = semchunk.chunkerify(lambda t: len(tok.encode(t, add_special_tokens=False).ids), 300)
        out["semchunk (offsets=True)"] = len(texts) / timed(lambda: [c(t, offsets=True, overlap=60) for t in texts])
    except ImportError:
        pass
    try:
        from chonkie import RecursiveChunker as Chonk

        ch = Chonk(tokenizer=tok, chunk_size=300)
        out["chonkie RecursiveChunker (no overlap)"] = len(texts) / timed(lambda: [ch.chunk(t) for t in texts])
    except ImportError:
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--semantic-docs", type=int, default=10, help="documents per corpus for the semantic chunker")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_chunkers"))
    args = ap.parse_args()

    from ragsweep.corpus.chunker import TokenChunker, load_tokenizer
    from ragsweep.corpus.chunking import MarkdownChunker, RecursiveChunker, SemanticChunker, SentenceChunker
    from ragsweep.corpus.embeddings import load_sentence_transformer
    from ragsweep.corpus.text import sentence_spans

    load_tokenizer("minilm")
    fast = {"tokens": TokenChunker, "recursive": RecursiveChunker, "sentences": SentenceChunker, "markdown": MarkdownChunker}
    result = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average_start": os.getloadavg(), "rounds": args.rounds,
              "corpora": {}}
    for name, docs in corpora().items():
        for cls in fast.values():  # warm-up: imports, the Markdown parser
            cls(size=300).chunk(docs[:2])
        per: dict[str, list[float]] = {k: [] for k in fast}
        for _ in range(args.rounds):
            for k, cls in fast.items():
                chunker = cls(size=300)
                per[k].append(timed(lambda: chunker.chunk(docs)))
        row = {}
        for k in fast:
            ratios = [t / base for t, base in zip(per[k], per["tokens"])]
            row[k] = {"docs_per_s": round(len(docs) / statistics.median(per[k]), 1),
                      "time_vs_tokens_median": round(statistics.median(ratios), 2)}
        model = load_sentence_transformer("minilm", "cpu")
        few = docs[: args.semantic_docs]
        sents = list(dict.fromkeys(d.text[a:b] for d in few for a, b in sentence_spans(d.text)))
        enc_s = timed(lambda: model.encode(sents, batch_size=64, convert_to_numpy=True, show_progress_bar=False))
        sem = SemanticChunker(size=300, device="cpu")
        sem_s = timed(lambda: sem.chunk(few))  # no cache: every sentence encoded
        tok_few = TokenChunker(size=300)
        tok_few_s = timed(lambda: tok_few.chunk(few))
        row["semantic"] = {"docs_per_s": round(len(few) / sem_s, 2), "time_vs_tokens_median": round(sem_s / tok_few_s, 1),
                           "documents": len(few), "sentences": len(sents), "minilm_sentences_per_s": round(len(sents) / enc_s, 1),
                           "encoding_share_of_time": round(enc_s / sem_s, 2)}
        tokens = sum(len(c) for c in TokenChunker(size=300).token_offsets([d.text for d in docs]))
        result["corpora"][name] = {"documents": len(docs), "minilm_tokens": tokens, "strategies": row}
        if name == "clapnq_longdoc":
            result["corpora"][name]["libraries_docs_per_s"] = {k: round(v, 1) for k, v in libraries(docs).items()}
        print(name, json.dumps(result["corpora"][name]), flush=True)
    result["load_average_end"] = os.getloadavg()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# Chunkers: documents/s against chunker=tokens", "",
             f"`python experiments/benchmarks/bench_chunkers.py --rounds {args.rounds}`; CPU: {result['cpu']} ({result['cores']} cores, "
             f"shared: load average {result['load_average_start'][0]:.1f} at start, {result['load_average_end'][0]:.1f} at end). "
             "Size 300 tokens, default overlaps, no cache. docs/s from the median of the interleaved rounds; "
             "'x tokens' = the median over rounds of (strategy time / tokens time in the same round).", "",
             "| corpus | documents | MiniLM tokens | strategy | docs/s | time x tokens |", "|---|---|---|---|---|---|"]
    for name, c in result["corpora"].items():
        for k, v in c["strategies"].items():
            lines.append(f"| {name} | {c['documents']} | {c['minilm_tokens']:,} | {k} | {v['docs_per_s']} | {v['time_vs_tokens_median']} |")
    lines += ["", "semantic (on the first --semantic-docs documents of each corpus, one pass, against tokens on the same "
              "documents): MiniLM encodes every sentence once (no cache here); its bound is MiniLM's own sentences/s:", ""]
    for name, c in result["corpora"].items():
        s = c["strategies"]["semantic"]
        lines.append(f"- {name} (first {s['documents']} documents): {s['sentences']:,} sentences, MiniLM alone {s['minilm_sentences_per_s']} sentences/s; "
                     f"encoding is {s['encoding_share_of_time']:.0%} of the semantic chunker's time")
    libs = result["corpora"]["clapnq_longdoc"].get("libraries_docs_per_s") or {}
    if libs:
        lines += ["", "Libraries for `recursive` on clapnq_longdoc (size 300, overlap 60 where supported; each counts the "
                  "tokens of a candidate piece by tokenizing it), one pass:", ""]
        lines += [f"- {k}: {v} docs/s" for k, v in libs.items()]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
