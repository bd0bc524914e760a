"""Progress of a simulation that runs in a cocotb subprocess, read from its log.

``TileSim.run(jobs, progress=callback)`` tails the simulator's ``sim.log`` while it runs.
The testbench (``sim/tb_tile.py``) logs one line per finished job
(``job NAME: N cycles, M events``); :class:`LogWatcher` turns each into a ``"job"``
event and sends a ``"tick"`` event every few seconds in between, so a long run is never
silent.  :class:`ProgressPrinter` is the callback the command line uses.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

JOB_LINE = re.compile(r"job (?P<name>.*): (?P<cycles>\d+) cycles, (?P<events>\d+) events\s*$")


class LogWatcher:
    """Poll a growing log file in a thread; call ``callback(event: dict)`` for each job
    line and every ``tick_s`` seconds (3x and 6x that after one and five minutes).  Events:

    * ``{"event": "job", "index": i, "total": n, "name", "cycles", "events", "seconds", "elapsed"}``
      (``index`` counts from 1; ``seconds`` since the previous job finished, loading included)
    * ``{"event": "tick", "done": i, "total": n, "elapsed"}``
    """

    def __init__(self, log: Path, total: int, callback, tick_s: float = 10.0, poll_s: float = 0.2):
        self.log, self.total, self.callback = Path(log), total, callback
        self.tick_s, self.poll_s = tick_s, poll_s
        self.done = 0
        self._t0 = self._last = self._last_tick = time.perf_counter()
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
            m = JOB_LINE.search(line)
            if m:
                now = time.perf_counter()
                self.done += 1
                self._emit({"event": "job", "index": self.done, "total": self.total, "name": m["name"],
                            "cycles": int(m["cycles"]), "events": int(m["events"]),
                            "seconds": now - self._last, "elapsed": now - self._t0})
                self._last = self._last_tick = now

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
                self._emit({"event": "tick", "done": self.done, "total": self.total, "elapsed": now - self._t0})

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._read()


class ProgressPrinter:
    """Print progress lines (to stderr by default): one per finished job, and a
    heartbeat while a job runs.  ``expected`` lists each job's predicted cycles."""

    def __init__(self, sim: str, stream=None, expected: list | None = None):
        self.sim, self.stream = sim, stream or sys.stderr
        self.expected = list(expected or [])

    def __call__(self, ev: dict):
        if ev["event"] == "job":
            msg = (f"[{self.sim}] job {ev['index']}/{ev['total']} done: {ev['name'] or '-'}, "
                   f"{ev['cycles']:,} cycles, {ev['events']:,} writes traced, {ev['seconds']:.1f} s")
            if ev["cycles"] >= 1000 and ev["seconds"] > 0:   # below that, start-up and loading dominate
                msg += f" ({ev['cycles'] / ev['seconds']:,.0f} cycles/s with loading)"
        elif ev["done"] < ev["total"]:
            msg = f"[{self.sim}] simulating job {ev['done'] + 1}/{ev['total']}, {ev['elapsed']:.0f} s elapsed"
            if ev["done"] < len(self.expected):
                msg += f" (predicted {self.expected[ev['done']]:,} cycles)"
        else:
            msg = f"[{self.sim}] all {ev['total']} job(s) done, finishing, {ev['elapsed']:.0f} s elapsed"
        print(msg, file=self.stream, flush=True)
