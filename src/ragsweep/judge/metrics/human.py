"""The judge metrics a person can label (issue 25): each label is the human counterpart of one
judge metric, on 0..1 (the metric's value divided by its scale). The prediction-powered estimate
of the metric (:mod:`ragsweep.analysis.ppi`) is the mean of this label over all questions, the judge's
values correcting for the questions nobody labelled. ``retrieved`` is the one label a retrieval-only
run's metrics use (:data:`RETRIEVAL_LABELS`); the others need a generated answer."""

from ragsweep.judge.metrics.registry import HumanLabel, register_human

for _label in (
    HumanLabel("correct", "ragchecker/overall/precision", "0..1 (or yes/no)",
               "the answer is correct: the share of what it states that the ground truth (or the question's true answer) supports"),
    HumanLabel("complete", "ragchecker/overall/recall", "0..1 (or yes/no)",
               "the answer is complete: the share of the ground-truth answer's points it states"),
    HumanLabel("faithful", "ragchecker/generator/faithfulness", "0..1 (or yes/no)",
               "the share of the answer's statements that the retrieved context supports"),
    HumanLabel("supported", "trace/adherence_rate", "yes/no",
               "the answer is fully supported by the retrieved context (every statement)"),
    # what a retrieval-only run (generator=none) can be labelled on: no answer, only the retrieved chunks
    HumanLabel("retrieved", "ragchecker/retriever/claim_recall", "yes/no per ground-truth point (or 0..1)",
               "the retrieved context states this point of the ground-truth answer (one row per point: the "
               "question's value is the share of its points the context holds)"),
):
    register_human(_label)

#: the labels a retrieval-only run (no generated answer) asks for
RETRIEVAL_LABELS = ("retrieved",)
