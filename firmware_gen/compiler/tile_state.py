"""What every placement on one tile shares: its reservation table, its instructions, the
rows and VXM parameter entries it has taken, its activation tables and the MXMs' timing.

Several plans place onto one tile (a tray's FFN share and the MoE slots beside it, a
resident model's layers) through this one object (``FfnPlan(..., state=...)``); a plan given
none owns a fresh tile.
"""

from __future__ import annotations

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import EAST, WEST, Instr
from lpu_arch.vxm import VXM_FIELDS, identity_tables, table_bytes

from firmware_gen.program import Program
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.reserve import Reservations


SIDES = ("MXM_W", "MXM_E")
TOWARDS = {"MXM_W": WEST, "MXM_E": EAST}      # the direction to each MXM from between them (VXM, SXMs)


class TileState:
    """The state of one tile that every plan placing onto it reads and extends.

    ``tables``, ``next_free``, ``n_params``, ``params``: what earlier placements left (a
    resident model's earlier layers and its shared tables); default: nothing taken, every
    table and parameter entry the identity.

    Members: ``res`` (the reservation table), ``timed`` (queue -> ``[(cycle, Instr)]``, lowered
    by ``FfnPlan.program``), ``memory`` (MEM slice -> ``(mem_depth, lanes)`` uint8, the rows
    loaded), ``loaded`` (MEM slice -> the rows :meth:`load` wrote, zero ones too), ``next_free`` (MEM slice -> its first untaken row), ``params``/``n_params`` (the
    VXM parameter entries, ``0 .. n_params - 1`` taken), ``tables`` (``(vxm_tables, 256)``
    int8 activation tables), and per MXM: ``slot_ready`` (``{x slot: first cycle an MM may
    read it}``), ``loader_free`` (first cycle a new ``LW`` may issue), ``load_end`` (first
    cycle a new load may start: the last one swapped), ``last_mm`` (its last ``MM``, -1: none).
    """

    def __init__(self, cfg: TileConfig, tables: np.ndarray | None = None, next_free: dict | None = None,
                 n_params: int = 0, params: np.ndarray | None = None):
        self.cfg = cfg
        self.res = Reservations(cfg)
        self.timed: dict[str, list[tuple[int, Instr]]] = {n: [] for n in cfg.queue_names}
        self.memory = {n: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for n in cfg.mem_names}
        self.loaded = {n: set() for n in cfg.mem_names}
        self.next_free = {n: 0 for n in cfg.mem_names} if next_free is None else next_free
        self.params = Program(cfg).vxm_params.copy() if params is None else params
        self.n_params = n_params
        self.tables = identity_tables(cfg) if tables is None else tables
        self.slot_ready = {s: {} for s in SIDES}
        self.loader_free = {s: 0 for s in SIDES}
        self.load_end = {s: 0 for s in SIDES}
        self.last_mm = {s: -1 for s in SIDES}

    def emit(self, name: str, cycle: int, instr: Instr) -> None:
        """Place ``instr`` in queue ``name`` on ``cycle`` (its slot already reserved in :attr:`res`)."""
        self.timed[name].append((cycle, instr))

    def alloc(self, name: str, rows: int) -> int:
        """The first of ``rows`` rows of MEM slice ``name`` taken now (from :attr:`next_free`)."""
        a = self.next_free[name]
        self.next_free[name] += rows
        if self.next_free[name] > self.cfg.mem_depth:
            # A single FFN's capacity is checked up front (FfnPlan._check_capacity); a layout
            # that shares the slices (MoE slots beside a tray's shared expert) ends here.
            raise CompileError(f"{name} needs {self.next_free[name]} rows for what is placed on it; a MEM slice "
                               f"holds mem_depth = {self.cfg.mem_depth} rows")
        return a

    def load(self, name: str, addr: int, rows) -> None:
        """Rows ``rows`` (``(k, lanes)``, or one vector) into MEM slice ``name``'s image from
        row ``addr``, declared loaded (``Program.declare_defined``: a zero row is loaded as zero)."""
        rows = np.asarray(rows)
        k = 1 if rows.ndim == 1 else len(rows)
        self.memory[name][addr:addr + k] = rows
        self.loaded[name].update(range(addr, addr + k))

    def new_param(self, **fields) -> int:
        """The next free VXM parameter entry, its ``fields`` (``lpu_arch.vxm.VXM_FIELDS``) set."""
        e = self.n_params
        if e >= len(self.params):
            # A single FFN's entries are checked up front (FfnPlan._check_capacity); placements
            # that share the entries (a resident model's layers, the MoE slots) end here.
            raise CompileError(f"the VXM parameter entries run out: entry {e} is needed for what is placed on the "
                               f"tile; the VXM has vxm_param_depth = {len(self.params)}")
        self.n_params += 1
        for f, v in fields.items():
            self.params[e, :, VXM_FIELDS.index(f)] = v
        return e

    def set_table(self, k: int, table) -> None:
        """Activation table ``k``: ``table``'s 256 entries (int8 values or E4M3 codes) as the
        program loads them (``Program.set_table``)."""
        self.tables[k] = table_bytes(table)
