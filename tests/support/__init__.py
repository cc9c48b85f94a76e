"""What the tests share, found through ``tests/conftest.py`` (pytest puts ``tests/`` on sys.path
when it loads that conftest): the repository's paths, so no test file works them out from its
own location, and the few helpers more than one test file uses.

    from support import CONF, FIXTURES, ROOT, TESTS
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/
ROOT = TESTS.parent  # the repository
SRC = ROOT / "src"
CONF = SRC / "ragsweep" / "conf"
FIXTURES = TESTS / "fixtures"
FAKE_OPENAI_SERVER = TESTS / "fake_openai_server.py"


def answered_requests(log_text: str) -> int:
    """Chat completions a ragsweep-started llama.cpp server's log shows answered: llama-cpp-python's
    server writes an access-log line per request, llama.cpp's llama-server (no access log) a timing
    line per finished task."""
    return log_text.count("POST /v1/chat/completions") + log_text.count("prompt eval time =")
