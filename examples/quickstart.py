# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       format_name: percent
# ---

# %% [markdown]
# # ragsweep from Python
#
# One RAG system, a small sweep and a paired comparison, on the built-in questions, without a
# model server (`generator=none`: retrieval-only, the retriever-side metrics need no answer).
# Open it as a notebook with `jupytext --to notebook examples/quickstart.py`, or run it as a
# script: `python examples/quickstart.py`. Everything is logged to MLflow (`./mlruns`), as the
# `ragsweep` command logs it; docs/python.md is the guide.

# %%
import pandas as pd

import ragsweep

pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 12)
SMALL = "generator=none dataset.limit=4 experiment_name=quickstart"

# %% [markdown]
# ## One system
# `ragsweep.run` takes the command line's overrides and returns a `ragsweep.Run`: every metric with
# its 95% interval over questions and its n, and one row per question.

# %%
bm25 = ragsweep.run(f"retriever=bm25 retriever.top_k=2 {SMALL}", progress=False)
print(bm25.metrics.loc[["retrieval/recall_at_k", "ragchecker/retriever/claim_recall"]])

# %%
print(bm25.questions[["query_id", "question", "failed", "retrieval/recall_at_k", "ragchecker/retriever/claim_recall"]])

# %% [markdown]
# ## A small sweep
# `ragsweep.sweep` is `ragsweep -m`: one MLflow parent run, one child per system, the same
# launcher and sweeper. `results()` is one row per system x question.

# %%
sweep = ragsweep.sweep(f"retriever=bm25,tfidf retriever.top_k=2 {SMALL}", echo=False)
df = sweep.results()
print(df.groupby("retriever")[["retrieval/recall_at_k", "ragchecker/retriever/claim_recall"]].mean())

# %% [markdown]
# ## A paired comparison
# The differences `tfidf - bm25` over the questions both scored, with their interval and p
# (Holm-adjusted over the rows), as `ragsweep-report` computes them.

# %%
ids = df.drop_duplicates("retriever").set_index("retriever")["run_id"]
print(ragsweep.compare(ids["bm25"], ids["tfidf"], ["retrieval/recall_at_k", "retrieval/ndcg_at_k"],
                       tracking_uri=sweep.tracking_uri)[["mean_a", "mean_b", "diff", "ci_low", "ci_high", "n", "p_holm"]])
