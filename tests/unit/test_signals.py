"""An interrupt wins wherever it lands (issue 35, item 6): inside a library that wraps it into
another exception, after it stopped the server the code still talks to, and on SIGHUP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ragsweep import signals

# pydantic-core's words for a KeyboardInterrupt raised while it builds a validator (seen when
# Ctrl-C landed in the openai client's first response parse): no __cause__, no __context__
SCHEMA_ERROR = ('Error building "definitions" validator:\n  SchemaError: Error building "model" validator:\n'
                '  SchemaError: Field "kind":\n  SchemaError: Error building "literal" validator:\n'
                '  KeyboardInterrupt: signal 2')


def schema_error() -> Exception:
    """pydantic-core's own SchemaError, as it wraps an interrupt raised while it builds a validator."""
    from pydantic_core import SchemaError

    return SchemaError(SCHEMA_ERROR)


def test_an_interrupt_wrapped_by_a_library_is_found():
    assert str(signals.interrupt_in(schema_error())) == "signal 2"
    # the same words at the end of another error (a server log's tail) are not an interrupt
    assert signals.interrupt_in(RuntimeError("server died; last lines of its log:\nKeyboardInterrupt")) is None
    try:
        try:
            raise KeyboardInterrupt("signal 15")
        except KeyboardInterrupt as ki:
            raise ValueError("while handling it") from ki
    except ValueError as chained:
        assert str(signals.interrupt_in(chained)) == "signal 15"
    assert signals.interrupt_in(ValueError("no")) is None and signals.interrupt_in(None) is None


def test_what_leaves_a_run_after_an_interrupt_leaves_as_the_interrupt():
    signals.reset()
    with pytest.raises(ValueError):  # no interrupt: an error stays an error
        with signals.Interrupts():
            raise ValueError("a real failure")
    with pytest.raises(KeyboardInterrupt, match="signal 2") as err:
        with signals.Interrupts():
            raise schema_error()
    assert type(err.value.__cause__).__name__ == "SchemaError"
    try:
        with pytest.raises(KeyboardInterrupt, match="signal 15"):
            with signals.Interrupts():
                signals.mark(signal.SIGTERM)  # the handler ran; the code went on and failed
                raise ConnectionError("the server was stopped")
    finally:
        signals.reset()


def test_sighup_is_an_interrupt_like_sigterm():
    """A closed terminal: KeyboardInterrupt("signal 1") inside a run, as SIGTERM gives "signal 15"."""
    code = textwrap.dedent("""
        import os, signal, sys, time
        from ragsweep import signals
        try:
            with signals.Interrupts():
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(5)
        except KeyboardInterrupt as exc:
            print("interrupted", exc, signals.received())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == ["interrupted", "signal", "1", "1"], proc.stderr


def test_the_openai_clients_models_are_built_before_the_first_request():
    """The openai client builds its pydantic models on the first response; warmed when the client
    is first used, so no real request's parse can be where an interrupt lands in a schema build."""
    code = ("from openai.types.chat import ChatCompletion as C\n"
            "before = C.__pydantic_complete__\n"
            "from ragsweep.rag.generator import transport\n"
            "transport._openai()\n"
            "print(before, C.__pydantic_complete__)\n")
    env = {**os.environ}
    env.pop("DEFER_PYDANTIC_BUILD", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["False", "True"], proc.stderr[-2000:]
