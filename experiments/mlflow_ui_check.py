"""Check a sweep in the MLflow UI: the parent run with its children, through the REST API and in a
headless Chromium screenshot.

    python experiments/mlflow_ui_check.py --tracking-uri sqlite:///mlruns/mlflow.db --experiment ragchecker_topk
    python experiments/mlflow_ui_check.py ... --out reports/ui/ --expect-children 3 --port 0 --no-browser

1. Starts ``mlflow server`` over the store on 127.0.0.1 (a free port with ``--port 0``), in its own
   process group, and waits for ``GET /health``; the server is always stopped at the end
   (SIGTERM to the group, then SIGKILL).
2. Through the server's REST API, with ``ragsweep.tracking`` (which reads runs for ``ragsweep-report``
   too, with the same notion of one system), finds the latest parent run
   of the experiment (tag ``ragsweep.role=parent``) and its children (tag ``mlflow.parentRunId``),
   checks that there are exactly ``--expect-children`` FINISHED children (one per system: a child
   re-run by a resumed sweep counts once, the latest, as in ``ragsweep-report``) and that every one
   of them has the ``--metrics`` (RAGChecker and TRACe by default); prints a table.
3. Headless Chromium (Debian's ``chromium``) opens the experiment's runs page
   (``#/experiments/<id>/runs``) with the parent expanded and the checked metrics as columns,
   checks in the page that the parent's and every child's rows are there, and saves ``runs.png``;
   then the chart view of the same runs (``?compareRunsMode=CHART``, one bar chart per checked
   metric) as ``charts.png``. Each PNG is checked to be a real page (size, colour variety), and
   the paths are printed.

MLflow 3 shows child runs collapsed under their parent and keeps the expanded rows, the columns
and the chart filter in the browser's local storage, so a plain ``chromium --screenshot`` cannot
show them. The browser is therefore driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port is opened), with the usual headless flags and a fresh
``--user-data-dir``: it seeds that state (falling back to clicking the parent's expander), waits
for the rows and metrics to be in the page instead of a fixed ``--virtual-time-budget``, and
captures the PNGs. The store is only read.

Exit status 0 when everything checks out, else 1 with a one-line ``mlflow-ui-check: FAILED: ...``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

DEFAULT_METRICS = ("ragchecker/overall/f1", "ragchecker/retriever/claim_recall", "trace/relevance")
TABLE_METRICS = DEFAULT_METRICS + ("retrieval/recall_at_k",)
TABLE_PARAMS = ("top_k", "retriever")
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--no-default-browser-check",
    "--remote-debugging-pipe",
)


class CheckError(RuntimeError):
    """A failed check; its message is the one-line reason."""


# -- the MLflow server ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_store_uri(uri: str, cwd: Path | None = None) -> str:
    """Make a local store URI absolute (the server runs in a scratch directory) and make sure it
    exists: ``mlflow server`` would otherwise create an empty store and the check would say
    'experiment not found' instead of 'no store here'."""
    cwd = Path(cwd or os.getcwd())
    if uri.startswith("sqlite:///"):
        raw = uri[len("sqlite:///"):]
        path = Path(raw) if raw.startswith("/") else (cwd / raw)
        if not path.is_file():
            raise CheckError(f"no MLflow store at {path} (from --tracking-uri {uri})")
        return "sqlite:///" + str(path.resolve())
    if uri.startswith("file:"):
        path = Path(urllib.parse.urlparse(uri).path)
    elif "://" not in uri:
        path = Path(uri) if Path(uri).is_absolute() else cwd / uri
    else:
        return uri  # a remote or database store: passed as is
    if not path.is_dir():
        raise CheckError(f"no MLflow store at {path} (from --tracking-uri {uri})")
    return path.resolve().as_uri()


def _mlflow_command() -> list[str]:
    exe = Path(sys.executable).with_name("mlflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mlflow"]


def _stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # the leader may be gone while workers of its group live on
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


@contextlib.contextmanager
def mlflow_server(tracking_uri: str, port: int = 0, timeout: float = 180.0,
                  log_path: Path | None = None) -> Iterator[str]:
    """Run ``mlflow server`` over the store on 127.0.0.1; yield its base URL."""
    uri = resolve_store_uri(tracking_uri)
    port = port or free_port()
    work = Path(tempfile.mkdtemp(prefix="mlflow-ui-check-"))
    log_path = log_path or work / "server.log"
    cmd = _mlflow_command() + [
        "server", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1", "--default-artifact-root", str(work / "mlartifacts"),
    ]
    # a read-only viewer: no background job runner (its worker processes cost seconds on a small
    # machine), no telemetry
    env = dict(os.environ, PYTHONUNBUFFERED="1", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise CheckError(f"mlflow server exited with status {proc.returncode}: {_tail(log_path)}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise CheckError(f"mlflow server on {base} not healthy after {timeout:.0f} s: {_tail(log_path)}")
            time.sleep(0.5)
        yield base
    finally:
        _stop_group(proc)
        shutil.rmtree(work, ignore_errors=True)


# -- the REST check ------------------------------------------------------------------------------
@dataclass
class Run:
    run_id: str
    run_name: str
    status: str
    start_time: int
    end_time: int
    metrics: dict[str, float]
    params: dict[str, str]
    tags: dict[str, str]

    @classmethod
    def from_mlflow(cls, r: Any) -> "Run":
        return cls(
            run_id=r.info.run_id, run_name=r.info.run_name or "", status=r.info.status,
            start_time=int(r.info.start_time or 0), end_time=int(r.info.end_time or 0),
            metrics=dict(r.data.metrics), params=dict(r.data.params), tags=dict(r.data.tags),
        )


@dataclass
class SweepCheck:
    base_url: str
    experiment: str
    experiment_id: str
    parent: Run
    children: list[Run]                      # the FINISHED children checked (latest per system)
    others: list[Run] = field(default_factory=list)  # children in other states or superseded
    metrics: tuple[str, ...] = DEFAULT_METRICS

    def table(self) -> str:
        params = [p for p in TABLE_PARAMS if any(p in c.params for c in self.children)]
        metrics = list(dict.fromkeys(list(self.metrics) + [m for m in TABLE_METRICS if any(m in c.metrics for c in self.children)]))
        head = ["role", "run name", "status"] + params + metrics
        rows = [["parent", self.parent.run_name, self.parent.status] + [""] * (len(params) + len(metrics))]
        for c in self.children:
            rows.append(["child", c.run_name, c.status] + [c.params.get(p, "") for p in params]
                        + ["-" if c.metrics.get(m) is None else f"{c.metrics[m]:.4f}" for m in metrics])
        for c in self.others:
            rows.append(["(other)", c.run_name, c.status] + [c.params.get(p, "") for p in params] + [""] * len(metrics))
        widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
        fmt = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
        return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def rest_check(base_url: str, experiment: str, expect_children: int = 3,
               metrics: tuple[str, ...] | list[str] = DEFAULT_METRICS) -> SweepCheck:
    """Find the latest parent run of ``experiment`` and its children through the REST API and
    check them; raise :class:`CheckError` with the reason when a check fails."""
    from ragsweep import tracking

    metrics = tuple(metrics)
    try:  # the runs are found and read as ragsweep-report reads them, through the server's REST API
        runs = tracking.load_sweep_runs(tracking.client(base_url), experiment, None, require_finished=False)
    except tracking.TrackingError as exc:
        raise CheckError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - an MlflowException from the server: its message
        raise CheckError(f"REST: {str(exc).splitlines()[0]}") from None
    eid = runs.experiment_id
    parent = Run.from_mlflow(runs.parent)
    kept = [Run.from_mlflow(r) for r in runs.children]
    others = [Run.from_mlflow(r) for r in runs.others]
    found = kept + others
    check = SweepCheck(base_url, experiment, eid, parent, kept, others, metrics)
    if len(kept) != expect_children:
        states = ", ".join(f"{r.run_name or r.run_id}={r.status}" for r in found) or "none"
        raise CheckError(f"parent run {parent.run_name or parent.run_id} ({parent.run_id}) has {len(kept)} FINISHED "
                         f"child run(s), expected {expect_children} (children: {states})")
    missing = [f"{r.run_name or r.run_id}: {m}" for r in kept for m in metrics
               if m not in r.metrics or r.metrics[m] is None]
    if missing:
        raise CheckError(f"child runs lack metrics: {'; '.join(missing)}")
    return check


# -- the browser ---------------------------------------------------------------------------------
def find_chromium(explicit: str | None = None) -> str | None:
    for cand in ([explicit] if explicit else CHROMIUM_CANDIDATES):
        path = cand if os.path.isabs(cand) else shutil.which(cand)
        if path and os.access(path, os.X_OK):
            return path
    return None


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fd 3: commands in, fd 4:
    replies out, each message JSON ended by NUL). No debugging port is opened."""

    def __init__(self, chromium: str, width: int = 1600, height: int = 1000, log_path: Path | None = None):
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="mlflow-ui-check-chromium-")
        self.log_path = log_path or Path(self.profile) / "chromium.log"
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def child_fds() -> None:  # in the child before exec: the pipe ends become fds 3 and 4
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.close(a)
            os.close(b)

        args = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", "about:blank"]
        try:
            with open(self.log_path, "wb") as log:
                # close_fds=False: subprocess would close fds 3 and 4 after child_fds; Python's
                # own descriptors are not inheritable, so nothing else leaks into the browser.
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             close_fds=False, preexec_fn=child_fds, start_new_session=True)
        except OSError as exc:
            os.close(self._cmd_w)
            os.close(self._res_r)
            shutil.rmtree(self.profile, ignore_errors=True)
            raise CheckError(f"cannot start {chromium}: {exc}") from None
        finally:
            with contextlib.suppress(OSError):
                os.close(cmd_r)
            with contextlib.suppress(OSError):
                os.close(res_w)
        self._buf = b""
        self._next_id = 0
        self.session: str | None = None

    # protocol
    def send(self, method: str, params: dict | None = None, timeout: float = 30.0, session: bool = True) -> dict:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        try:
            os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        except OSError as exc:
            raise CheckError(f"chromium: cannot send {method}: {exc}; {_tail(self.log_path)}") from None
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise CheckError(f"chromium: {method}: {reply['error'].get('message')}")
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckError(f"chromium: no reply to {method} within {timeout:.0f} s")
            ready, _, _ = select.select([self._res_r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._res_r, 1 << 20)
                if not chunk:
                    raise CheckError(f"chromium exited (status {self.proc.poll()}): {_tail(self.log_path)}")
                self._buf += chunk

    def open_page(self) -> None:
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        pages = [t for t in targets if t.get("type") == "page"]
        target = pages[0]["targetId"] if pages else self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    def navigate(self, url: str) -> None:
        res = self.send("Page.navigate", {"url": url})
        if res.get("errorText"):
            raise CheckError(f"chromium: cannot open {url}: {res['errorText']}")

    def eval(self, expression: str, timeout: float = 30.0) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in res:
            raise CheckError(f"chromium: script failed: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CheckError(f"MLflow UI: {what} not shown within {timeout:.0f} s")
            time.sleep(0.5)

    def resize(self, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})

    def fit_content(self, max_height: int = 6000) -> int:
        """Grow the viewport by what the page's main scrolling pane hides (the MLflow UI scrolls
        inside panes, not the document, and renders charts only once they are in view)."""
        extra = self.eval("Math.max(0, ...[...document.querySelectorAll('*')].filter(e => "
                          "/auto|scroll/.test(getComputedStyle(e).overflowY) && e.clientHeight >= innerHeight / 2)"
                          ".map(e => e.scrollHeight - e.clientHeight))") or 0
        current = self.eval("innerHeight") or self.height
        height = min(max_height, int(current + extra))
        if extra > 8 and height > current:
            self.resize(height)
        return height

    def screenshot(self, path: Path, full: bool = False) -> Path:
        """Save a PNG of the viewport; ``full``: of the whole main pane (and reset the size after)."""
        if full:
            self.fit_content()
            time.sleep(0.5)
        try:
            data = self.send("Page.captureScreenshot", {"format": "png"}, timeout=60)["data"]
        finally:
            if full:
                self.resize(self.height)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close", session=False, timeout=5)
        _stop_group(self.proc, grace=5)
        for fd in (self._cmd_w, self._res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def _js(value: Any) -> str:
    return json.dumps(value)


# JS: every one of NAMES is in the text of the page
_JS_ALL_SHOWN = "(() => {{ const t = document.body ? document.body.innerText : ''; return {names}.every(n => t.includes(n)); }})()"
# JS: the runs table has a row for every one of IDS (ag-grid's row-id is the run id)
_JS_ROWS_SHOWN = "{ids}.every(id => document.querySelector(`.ag-row[row-id=\"${{id}}\"]`))"
# JS: click the expander (the +/- button of the Run Name cell) of the parent's row
_JS_EXPAND = """(() => {{
  for (const row of document.querySelectorAll(`.ag-row[row-id="${{{pid}}}"]`)) {{
    const btn = row.querySelector('button[data-component-id*="runnamecellrenderer" i], [col-id*="Run Name"] button');
    if (btn) {{ btn.click(); return true; }}
  }}
  return false;
}})()"""
# JS: type TEXT into the chart view's search box (a React input: set the value, fire 'input')
_JS_TYPE_CHARTS_FILTER = """(() => {{
  const box = document.querySelector('input[placeholder*="Search metric charts" i], input[role="searchbox"]');
  if (!box) return false;
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(box, {text});
  box.dispatchEvent(new Event('input', {{bubbles: true}}));
  return true;
}})()"""
# JS: the chart view's search box holds TEXT (null: no box found)
_JS_CHARTS_FILTER_IS = """(() => {{
  const box = document.querySelector('input[placeholder*="Search metric charts" i], input[role="searchbox"]');
  return box ? box.value === {text} : null;
}})()"""
# JS: close the MLflow Assistant side panel, which covers a third of the page
_JS_CLOSE_ASSISTANT = """(() => {{
  for (const b of document.querySelectorAll('button[aria-label="Close"]')) {{
    for (let p = b.parentElement; p && p !== document.body; p = p.parentElement) {{
      if (p.querySelector('.ag-root')) break;
      if ((p.innerText || '').includes('Assistant')) {{ b.click(); return true; }}
    }}
  }}
  return false;
}})()"""


def check_png(path: Path, min_width: int = 800, min_height: int = 500) -> str:
    """The PNG is a real page: big enough, and not one flat colour (a blank or error page)."""
    from PIL import Image

    if not path.is_file() or path.stat().st_size < 10_000:
        raise CheckError(f"screenshot {path} missing or too small ({path.stat().st_size if path.exists() else 0} bytes)")
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        if w < min_width or h < min_height:
            raise CheckError(f"screenshot {path} is {w}x{h}, expected at least {min_width}x{min_height}")
        colors = im.getcolors(maxcolors=1 << 20) or []
    n_colors = len(colors)
    top = max((c for c, _ in colors), default=w * h)
    busy = 1.0 - top / float(w * h)
    if n_colors < 32 or busy < 0.02:
        raise CheckError(f"screenshot {path} looks blank ({n_colors} colours, {busy:.1%} non-background pixels)")
    return f"{w}x{h}, {path.stat().st_size} bytes, {n_colors} colours, {busy:.0%} non-background"


def _charts_filter(metrics) -> str:
    """The chart view's search box takes a regular expression: one alternative per metric."""
    return "|".join(re.sub(r"[.*+?^${}()|\[\]\\]", lambda m: "\\" + m.group(0), k) for k in metrics)


def _ui_state(check: SweepCheck) -> dict[str, str]:
    """Local-storage entries for the MLflow 3 UI (the state it keeps per experiment page): the
    parent expanded, the checked metrics and the swept params as columns, the Assistant panel
    closed. Internal to the UI, so only a head start: the rows are still checked, and the
    expander is clicked when the state did not take."""
    metrics = list(dict.fromkeys(list(check.metrics) + [m for m in TABLE_METRICS if any(m in c.metrics for c in check.children)]))
    params = [p for p in TABLE_PARAMS if any(p in c.params for c in check.children)]
    columns = [f"metrics.`{m}`" for m in metrics] + [f"params.`{p}`" for p in params]
    # ag-grid takes the widths only with the full column order (its column ids)
    order = ["attributes.`Run Name`", "runDateAndNestInfo", "duration"] + columns
    name_width = max(190, min(320, 8 * max(len(r.run_name) for r in [check.parent, *check.children]) + 70))
    widths = {"attributes.`Run Name`": name_width, **{f"metrics.`{m}`": min(240, max(110, 7 * len(m) + 20)) for m in metrics}}
    state = {"selectedColumns": columns, "columnOrder": order, "columnWidths": widths,
             "runsExpanded": {check.parent.run_id: True}, "chartsSearchFilter": _charts_filter(check.metrics)}
    key = "MLflowLocalStorage-1.1-ExperimentPage-" + json.dumps([check.experiment_id]) + "-ReactComponentState"
    return {key: json.dumps(state), "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true",
            "mlflow.assistant.panelOpen_v1": "false"}


def take_screenshots(check: SweepCheck, out_dir: Path, chromium: str, width: int = 1600, height: int = 1000,
                     timeout: float = 90.0, log=print) -> list[Path]:
    """The runs page with the parent expanded (``runs.png``) and the chart view of the same runs
    with a chart per checked metric (``charts.png``); checks that the parent's and the children's
    rows and the metrics are in the pages and that the PNGs are not blank; raises
    :class:`CheckError` otherwise."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base, eid = check.base_url, check.experiment_id
    parent_name = check.parent.run_name or check.parent.run_id
    child_ids = [c.run_id for c in check.children]
    child_names = [c.run_name or c.run_id for c in check.children]
    rows_shown = (_JS_ROWS_SHOWN.format(ids=_js(child_ids)) + " && "
                  + _JS_ALL_SHOWN.format(names=_js([parent_name] + child_names)))
    shots: list[Path] = []
    browser = Browser(chromium, width, height, log_path=out_dir / "chromium.log")
    try:
        browser.open_page()
        # 1. the runs page, the parent expanded. Local storage is per origin: set it from a page
        # of the server, then load the UI.
        browser.navigate(f"{base}/health")
        browser.wait_for("document.readyState === 'complete'", "the server's /health page", 30)
        browser.eval("(() => { for (const [k, v] of Object.entries(%s)) localStorage.setItem(k, v); return true; })()"
                     % _js(_ui_state(check)))
        browser.navigate(f"{base}/#/experiments/{eid}/runs")
        browser.wait_for(_JS_ROWS_SHOWN.format(ids=_js([check.parent.run_id])),
                         f"the row of parent run '{parent_name}' on the runs page", timeout)
        deadline = time.monotonic() + 5
        while not browser.eval(rows_shown) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not browser.eval(rows_shown):  # the stored state did not take: click the expander
            browser.wait_for(_JS_EXPAND.format(pid=_js(check.parent.run_id)), f"the expander of parent run '{parent_name}'", 30)
        browser.wait_for(rows_shown, f"the {len(child_ids)} child runs under parent run '{parent_name}'", 30)
        browser.eval(_JS_CLOSE_ASSISTANT.format())
        browser.eval("(() => { const b = document.querySelector('button[aria-label=\"Toggle sidebar\"]'); if (b) b.click(); return !!b; })()")
        time.sleep(1.0)  # let the grid finish painting
        shots.append(browser.screenshot(out_dir / "runs.png"))
        log(f"runs page: parent and {len(child_ids)} child rows shown; {shots[-1]} ({check_png(shots[-1])})")
        # 2. the chart view (compareRunsMode=CHART): the runs beside a bar chart per checked metric
        browser.navigate(f"{base}/#/experiments/{eid}/runs?compareRunsMode=CHART")
        browser.wait_for(rows_shown, "the parent and child runs in the chart view", timeout)
        charts_shown = _JS_ALL_SHOWN.format(names=_js(list(check.metrics)))
        filter_box = _JS_CHARTS_FILTER_IS.format(text=_js(_charts_filter(check.metrics)))
        deadline = time.monotonic() + timeout
        while True:  # charts render once in view: grow the viewport until all are there
            browser.fit_content()
            if browser.eval(charts_shown):
                break
            if time.monotonic() > deadline:
                raise CheckError(f"MLflow UI: the charts of {', '.join(check.metrics)} not shown in the chart view within {timeout:.0f} s")
            if browser.eval(filter_box) is False:  # the stored filter did not take: type it in
                browser.eval(_JS_TYPE_CHARTS_FILTER.format(text=_js(_charts_filter(check.metrics))))
                browser.resize(browser.height)  # grown for all the charts so far: start over
            time.sleep(1.0)
        time.sleep(1.0)
        shots.append(browser.screenshot(out_dir / "charts.png", full=True))
        log(f"chart view: {len(child_ids)} child runs and charts of {len(check.metrics)} metrics shown; "
            f"{shots[-1]} ({check_png(shots[-1])})")
    finally:
        browser.close()
    browser.log_path.unlink(missing_ok=True)  # kept only when something failed
    return shots


# -- CLI -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db", help="the sweep's MLflow store")
    ap.add_argument("--experiment", required=True, help="MLflow experiment name of the sweep")
    ap.add_argument("--out", default="reports/ui", help="folder for the screenshots (default: reports/ui)")
    ap.add_argument("--expect-children", type=int, default=3, help="FINISHED child runs expected (default: 3)")
    ap.add_argument("--metrics", default=",".join(DEFAULT_METRICS), help="comma-separated metrics every child must have")
    ap.add_argument("--port", type=int, default=0, help="port for mlflow server on 127.0.0.1 (0: a free one)")
    ap.add_argument("--chromium", default=None, help="browser binary (default: /usr/bin/chromium, else chromium on PATH)")
    ap.add_argument("--window-size", default="1600x1000", help="browser viewport WIDTHxHEIGHT (default: 1600x1000)")
    ap.add_argument("--no-browser", action="store_true", help="REST check only, no screenshots")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the server (and for each page)")
    args = ap.parse_args(argv)
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    try:
        width, height = (int(v) for v in args.window_size.lower().split("x"))
    except ValueError:
        ap.error(f"--window-size: expected WIDTHxHEIGHT, got {args.window_size!r}")
    def _terminate(signum, _frame):  # run the finally blocks: no server or browser left behind
        print(f"mlflow-ui-check: FAILED: interrupted by signal {signum}", file=sys.stderr)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        chromium = None
        if not args.no_browser:
            chromium = find_chromium(args.chromium)
            if chromium is None:
                raise CheckError("no chromium found (apt-get install chromium, or --chromium PATH, or --no-browser)")
        out = Path(args.out)
        with mlflow_server(args.tracking_uri, args.port, timeout=args.timeout) as base:
            print(f"mlflow server: {base} over {args.tracking_uri}")
            check = rest_check(base, args.experiment, args.expect_children, metrics)
            print(f"experiment '{check.experiment}' (id {check.experiment_id}), parent run "
                  f"{check.parent.run_name} ({check.parent.run_id}, {check.parent.status}), "
                  f"{len(check.children)} FINISHED child runs with {', '.join(metrics)}:")
            print(check.table())
            shots = []
            if chromium:
                shots = take_screenshots(check, out, chromium, width, height, timeout=min(args.timeout, 120.0))
    except CheckError as exc:
        print(f"mlflow-ui-check: FAILED: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - still one line, not a traceback
        print(f"mlflow-ui-check: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for s in shots:
        print(f"screenshot: {s}")
    print("mlflow-ui-check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
