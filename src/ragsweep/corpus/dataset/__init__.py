"""Dataset loaders of the corpus stage (``dataset=files``: :mod:`ragsweep.corpus.dataset.files`)."""
