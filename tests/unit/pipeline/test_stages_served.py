"""The run's ``served/*`` params: what answered (weight format, CPU variant, engine), logged once
the model server runs, for a job's own server and for a sweep's shared one alike."""

from __future__ import annotations

from types import SimpleNamespace

from ragsweep.pipeline import stages

SERVED = {"model_format": "q4_0", "cpu_variant": "zen4", "engine": "llama-server", "processes": 2,
          "slots_per_process": 4}


class Tracker:
    def __init__(self):
        self.params: dict = {}
        self.files: list = []

    def log_params(self, params):
        self.params.update(params)

    def log_file(self, path, where):
        self.files.append((path, where))


class Server:
    def __init__(self):
        self.events: list[str] = []

    def start(self):
        self.events.append("start")

    def stop(self):
        self.events.append("stop")

    @property
    def served(self):  # known only once it runs (the CPU variant comes from the server's log)
        assert "start" in self.events, "served read before the server started"
        return SERVED


def job(server, own):
    return SimpleNamespace(own_server=own, dry_run=False, server=server, tracker=Tracker(),
                           timer=lambda name: __import__("contextlib").nullcontext())


def test_a_jobs_own_server_logs_what_answered_after_it_started():
    j = job(Server(), own=True)
    with stages.serving(j):
        assert j.tracker.params == {f"served/{k}": v for k, v in SERVED.items()}
    assert j.server.events == ["start", "stop"]


def test_a_sweeps_shared_server_logs_what_answered_without_being_started_again():
    shared = Server()
    shared.events.append("start")  # the sweep started it
    j = job(shared, own=False)
    with stages.serving(j):
        pass
    assert j.tracker.params["served/cpu_variant"] == "zen4" and j.tracker.params["served/slots_per_process"] == 4
    assert shared.events == ["start"]


def test_a_server_that_says_nothing_logs_nothing():
    j = job(SimpleNamespace(start=lambda: None, stop=lambda: None), own=True)  # e.g. an external endpoint
    with stages.serving(j):
        pass
    assert j.tracker.params == {}
