"""Restarts of a managed server's process that died under a run (a crash, the out-of-memory
killer): the watcher thread of :class:`ragsweep.rag.generator.servers.managed.ManagedServer`.

With ``max_restarts`` > 0 a thread polls the process; when it has died and nobody stopped it, it is
restarted on the same port (its clients' addresses stay valid) after a backoff that doubles from
``restart_backoff_s``, at most ``max_restarts`` times in all; ``restarts`` counts them and the log of
every process is kept (``log_paths``). Then it gives up, and ``death()`` says so, naming the logs.
"""

from __future__ import annotations

import logging
import threading

from ragsweep.rag.generator.servers import process
from ragsweep.rag.generator.servers.errors import ServerError
from ragsweep.rag.generator.servers.process import describe_exit

log = logging.getLogger(__name__)


class Restarts:
    """The watcher half of ``ManagedServer`` (its attributes are set in ``ManagedServer.__init__``)."""

    @property
    def restarting(self) -> bool:
        """Whether the watcher is (or is about to be) restarting this server: a death it will mend."""
        return self._watcher is not None and self._watcher.is_alive() and self._gave_up is None

    def endpoint_gone(self, index: int = 0) -> bool:
        """Whether the process behind ``base_urls[index]`` died for good (not being restarted):
        a client stops waiting for it to answer again."""
        if self._gave_up is not None:
            return True
        ended = self._stopped or (self._proc is not None and self._proc.poll() is not None)
        return ended and not self.restarting

    def restart_count(self) -> int:
        """Processes restarted after they died under a run (every process of this server)."""
        return self.restarts

    # -- the watcher: a process that dies under a run is restarted ---------------------------------
    def _supervise(self) -> None:
        if self.max_restarts <= 0 or (self._watcher is not None and self._watcher.is_alive()):
            return
        self._watcher = threading.Thread(target=self._watch, name=f"{self.kind}-watcher-{self.port}", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """Poll the process; when it has died (and nobody stopped it), restart it on its port after
        a doubling backoff, at most ``max_restarts`` times in all; then give up, saying why."""
        tries = 0  # restarts tried since the last death, a failed start included
        while not self._closing.wait(0.2):
            proc = self._proc
            rc = proc.poll() if proc is not None else None
            if rc is None or self._stopped:
                continue
            if self.restarts >= self.max_restarts:
                self._gave_up = self.exit_report(
                    rc, f"the {self.kind} server (pid {proc.pid}) died", [
                        f"it was restarted {self.restarts} time(s) and died again; gave up "
                        f"({self.config_key}.max_restarts={self.max_restarts}); the log of each process: "
                        + ", ".join(str(p) for p in self.log_paths)])
                log.error("%s", self._gave_up)
                return
            port = self.port
            wait = min(30.0, self.restart_backoff_s * 2 ** tries)
            log.warning("the %s server (pid %d, %s) died (%s); restarting it on port %s in %.1fs (restart %d of at "
                        "most %d; its log: %s)", self.kind, proc.pid, self.base_url, describe_exit(rc), port, wait,
                        self.restarts + 1, self.max_restarts, self.log_path)
            if self._closing.wait(wait):
                return
            with self._lock:
                if self._closing.is_set():
                    return
                self.restarts += 1
                tries += 1
                self._reap()
                try:
                    self._start_once(port)
                except ServerError as exc:
                    log.warning("restarting the %s server on port %s failed: %s", self.kind, port,
                                str(exc).splitlines()[0])
                    self._stopped = False  # _halt() marked it stopped: the next turn tries again (or gives up)
                    self.port = port
                    continue
                tries = 0
                log.warning("the %s server answers again on %s (pid %d), restart %d of at most %d",
                            self.kind, self.base_url, self._proc.pid, self.restarts, self.max_restarts)

    def _reap(self) -> None:
        """The dead process's leftovers gone (its group, registry entry, open log), its log kept."""
        proc = self._proc
        if proc is not None:
            if process.group_alive(proc.pid):
                process.kill_group(proc.pid, proc.pid, proc, self.stop_grace_s, self.second_sigterm_s)
            else:
                proc.wait()
        self._unregister()
        self._close_log()
        if self.log_path is not None:
            self._old_logs.append(self.log_path)
            self.log_path = None

