"""The BM25 stop words are scikit-learn's list, copied so a BM25 run does not import scikit-learn."""

import subprocess
import sys

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as SKLEARN

from ragsweep.rag.retriever import bm25
from ragsweep.rag.retriever.stopwords import ENGLISH_STOP_WORDS


def test_the_copy_equals_scikit_learns_list():
    assert ENGLISH_STOP_WORDS == SKLEARN and len(ENGLISH_STOP_WORDS) == 318
    assert bm25._stopword_set("english") == SKLEARN


def test_bm25_with_stop_words_does_not_import_scikit_learn():
    code = ("import sys; from ragsweep.rag.retriever import bm25; s = bm25._stopword_set('english'); "
            "print(len(s), any(m == 'sklearn' or m.startswith('sklearn.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["318", "False"]
