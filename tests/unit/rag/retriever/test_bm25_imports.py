"""What a BM25 run imports: scikit-learn's stop words copied (not imported), bm25s without numba."""

import subprocess
import sys

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN

from ragsweep.rag.retriever import bm25
from ragsweep.rag.retriever.stopwords import ENGLISH_STOP_WORDS


def test_the_copy_equals_scikit_learns_list():
    assert ENGLISH_STOP_WORDS == SKLEARN and len(ENGLISH_STOP_WORDS) == 318
    assert bm25._stopword_set("english") == SKLEARN


def test_bm25_with_stop_words_imports_neither_scikit_learn_nor_numba():
    code = ("import sys; from ragsweep.rag.retriever import bm25; s = bm25._stopword_set('english'); "
            "b = bm25._import_bm25s(); "
            "print(len(s), *(any(m == n or m.startswith(n + '.') for m in sys.modules) for n in ('sklearn', 'numba')), "
            "'numba' in sys.modules); import numba")  # numba itself still imports afterwards (ppi needs it)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["318", "False", "False", "False"]
