"""Progress of a simulation in a cocotb subprocess, read from its log.

The testbenches log ``job NAME: loaded, running`` and ``job NAME: N cycles, M events`` per
job; :class:`LogWatcher` tails ``sim.log`` and turns them into events, with a tick every few
seconds in between; :class:`ProgressPrinter` is the command line's callback."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

JOB_LINE = re.compile(r"job (?P<name>.*): (?P<cycles>\d+) cycles, (?P<events>\d+) events\s*$")
LOADED_LINE = re.compile(r"job (?P<name>.*): loaded, running\s*$")


class LogWatcher:
    """Poll a growing log file in a thread; call ``callback(event: dict)`` for each job's
    lines and every ``tick_s`` seconds (3x and 6x that after one and five minutes).  Events:

    * ``{"event": "loaded", "index": i, "total": n, "name", "seconds", "elapsed"}``: job i
      (counting from 1) is loaded and runs; ``seconds`` since the previous job finished
      (or since the watch began, simulator start-up included, for the first)
    * ``{"event": "job", "index": i, "total": n, "name", "cycles", "events", "seconds",
      "run_seconds", "elapsed"}``: job i finished; ``seconds`` since the previous job
      finished (loading included), ``run_seconds`` since it was loaded (None if the log
      had no ``loaded`` line)
    * ``{"event": "tick", "done": i, "total": n, "phase": "loading" | "running", "elapsed"}``
    """

    def __init__(self, log: Path, total: int, callback, tick_s: float = 10.0, poll_s: float = 0.2):
        self.log, self.total, self.callback = Path(log), total, callback
        self.tick_s, self.poll_s = tick_s, poll_s
        self.done = 0
        self._t0 = self._last = self._last_tick = time.perf_counter()
        self._loaded = None            # when the running job was loaded
        self._pos, self._partial = 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lpu-progress", daemon=True)
        self._thread.start()

    def _read(self):
        try:
            with open(self.log, errors="replace") as f:
                f.seek(self._pos)
                chunk = f.read()
                self._pos = f.tell()
        except FileNotFoundError:
            return
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        for line in lines:
            now = time.perf_counter()
            if m := JOB_LINE.search(line):
                self.done += 1
                run_s = None if self._loaded is None else now - self._loaded
                self._emit({"event": "job", "index": self.done, "total": self.total, "name": m["name"],
                            "cycles": int(m["cycles"]), "events": int(m["events"]),
                            "seconds": now - self._last, "run_seconds": run_s, "elapsed": now - self._t0})
                self._last = self._last_tick = now
                self._loaded = None
            elif m := LOADED_LINE.search(line):
                self._loaded = now
                self._emit({"event": "loaded", "index": self.done + 1, "total": self.total, "name": m["name"],
                            "seconds": now - self._last, "elapsed": now - self._t0})
                self._last_tick = now

    def _emit(self, event):
        try:
            self.callback(event)
        except Exception:   # a broken progress display must never break a run
            pass

    def _loop(self):
        while not self._stop.wait(self.poll_s):
            self._read()
            now = time.perf_counter()
            # Every tick_s for the first minute, then less often: long runs stay readable.
            every = self.tick_s * (1 if now - self._t0 < 60 else 3 if now - self._t0 < 300 else 6)
            if now - self._last_tick >= every:
                self._last_tick = now
                self._emit({"event": "tick", "done": self.done, "total": self.total,
                            "phase": "loading" if self._loaded is None else "running", "elapsed": now - self._t0})

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._read()


class ProgressPrinter:
    """Print progress lines (to stderr by default): one when a job is loaded and starts
    running, one when it is done, and a heartbeat in between.  ``expected`` lists each
    job's predicted cycles."""

    def __init__(self, sim: str, stream=None, expected: list | None = None):
        self.sim, self.stream = sim, stream or sys.stderr
        self.expected = list(expected or [])

    def _predicted(self, index: int) -> str:
        """`` (predicted N cycles)`` for job ``index`` (from 0), if known."""
        return f" (predicted {self.expected[index]:,} cycles)" if 0 <= index < len(self.expected) else ""

    def __call__(self, ev: dict):
        if ev["event"] == "loaded":
            msg = (f"[{self.sim}] job {ev['index']}/{ev['total']} loaded in {ev['seconds']:.1f} s, running"
                   + self._predicted(ev["index"] - 1))
        elif ev["event"] == "job":
            msg = (f"[{self.sim}] job {ev['index']}/{ev['total']} done: {ev['name'] or '-'}, "
                   f"{ev['cycles']:,} cycles, {ev['events']:,} writes traced, {ev['seconds']:.1f} s")
            run_s = ev.get("run_seconds")
            if run_s is not None:
                msg += f" (run and read-back {run_s:.1f} s"
                # The log is polled (poll_s): a rate over less than a second would be noise.
                msg += f", {ev['cycles'] / run_s:,.0f} cycles/s)" if ev["cycles"] >= 1000 and run_s >= 1.0 else ")"
            elif ev["cycles"] >= 1000 and ev["seconds"] > 0:   # below that, start-up and loading dominate
                msg += f" ({ev['cycles'] / ev['seconds']:,.0f} cycles/s with loading)"
        elif ev["done"] < ev["total"]:
            verb = "running" if ev.get("phase") == "running" else "loading"
            msg = f"[{self.sim}] {verb} job {ev['done'] + 1}/{ev['total']}, {ev['elapsed']:.0f} s elapsed"
            msg += self._predicted(ev["done"])
        else:
            msg = f"[{self.sim}] all {ev['total']} job(s) done, finishing, {ev['elapsed']:.0f} s elapsed"
        print(msg, file=self.stream, flush=True)
