"""What a flow found (``sim/flows/``): one :class:`Report` for every run, read by ``lpu``,
the bench and the tests.  ``to_json`` is what ``lpu ... --json`` prints, its keys in the
order the flow gave them (``keys``), so that the documented JSON stays as it is."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    """The result of one flow's run.  ``keys``: the JSON's keys in order (``passed``,
    ``problems`` and ``rows_key`` name those fields, any other a figure; a figure not named
    is left out of the JSON); empty: ``passed``, every figure, ``problems``, the rows."""
    flow: str                 # ffn, program, copy, tray, moe, c2c, decode or decode-tray
    passed: bool              # every check passed
    problems: list = field(default_factory=list)     # readable, empty: none
    figures: dict = field(default_factory=dict)      # what the flow measured, JSON-able, by name
    rows: list = field(default_factory=list)         # a JSON-able row per tile, job or token position
    rows_key: str | None = None                      # the rows' name in the JSON (tile, runs, positions, ...)
    keys: tuple = ()
    observed: list = field(default_factory=list)     # per row, the simulator's raw results (to compare simulators)

    OWN = ("passed", "problems")       # keys of the JSON that are fields, not figures (with rows_key)

    @classmethod
    def of(cls, flow: str, data: dict, rows_key: str | None = None, problems: list | None = None,
           figures: dict | None = None, observed: list = ()) -> Report:
        """The report whose JSON is ``data``: its ``passed``, ``problems`` (else
        ``problems``), rows under ``rows_key`` and every other key a figure, in order;
        ``figures``: more, left out of the JSON."""
        own = (*cls.OWN, rows_key)
        if "problems" in data and problems is not None:
            raise ValueError(f"the {flow} report's JSON has problems: give them there, not twice")
        return cls(flow, bool(data["passed"]), list(data.get("problems", problems or [])),
                   {**{k: v for k, v in data.items() if k not in own}, **(figures or {})},
                   list(data.get(rows_key, [])) if rows_key else [], rows_key, tuple(data), list(observed))

    def to_json(self) -> dict:
        """The report as JSON-able data, the keys in ``keys``' order."""
        own = {"passed": self.passed, "problems": self.problems}
        if self.rows_key:
            own[self.rows_key] = self.rows
        keys = self.keys or ("passed", *self.figures, "problems", *([self.rows_key] if self.rows_key else []))
        return {k: own[k] if k in own else self.figures[k] for k in keys}
