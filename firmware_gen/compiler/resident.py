"""Every layer of a model resident on one tile (the decode loop, ``docs/afd.md``).

``compile_resident(specs, cfg)`` places each layer's FFN as ``compile_ffn`` does, at its
own MEM rows, VXM parameter entries and activation table, and lowers every layer's program
into the same queues one after the other (layer ``l`` from instruction ``entry[l]``, started
by writing ``Csr.ENTRY``).  Everything is loaded once; per token and layer only x and y
cross the host bus, and each layer's cycle count is the same for every token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import Instr
from lpu_arch.vxm import VXM_FIELDS, identity_tables, table_bytes

from firmware_gen.golden import archmodel
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import pad, vector_bytes, with_x, x_image
from firmware_gen.compiler.ffn import FfnPlan
from firmware_gen.compiler.ffn_manifest import Manifest, output_matrix
from firmware_gen.compiler.tile_state import TileState
from firmware_gen.golden.numerics import FfnSpec, NumericsError, ffn_int
from firmware_gen.program import Program


@dataclass
class ResidentLayer:
    """One layer's share of a resident model."""
    index: int
    spec: FfnSpec
    program: Program               # this layer's queues alone, over the model's memories and parameters
    manifest: Manifest             # its cycles and output locations (writes predicted for x = 0)
    entry: int                     # the instruction its queues begin at
    x_rows: list                   # (slice, addr, block, column): where the host writes x
    lanes: int
    write_cycles: dict             # (column, block) -> the cycle y's vector is written

    def x_image(self, x_int8) -> dict:
        """``{slice: {row: vector}}``: the rows of int8 input ``x`` ((H,) or (B, H)) the host
        writes before starting the layer."""
        return x_image(self.x_rows, x_int8, self.lanes, self.spec.H)

    def y_rows(self) -> dict:
        """``{slice: [rows]}``: where the layer leaves y (to read back after the run)."""
        out = {}
        for m, a in self.manifest.outputs.values():
            out.setdefault(m, []).append(a)
        return {m: sorted(rows) for m, rows in out.items()}

    def y_from(self, memory: dict) -> np.ndarray:
        """y (B, H) int8 from the tile's MEM contents after the run."""
        return output_matrix(self.manifest, memory, self.lanes, self.spec.H)

    def predict(self, x_int8) -> list:
        """The layer's MEM writes for input ``x``: ``(cycle, slice, addr, bytes)`` from the
        integer FFN at the compiler's cycles."""
        L = self.lanes
        y = ffn_int(self.spec, np.atleast_2d(np.asarray(x_int8, np.int64)))
        yp = pad(y, (y.shape[0], self.manifest.padded[0]))
        return sorted(((self.write_cycles[(b, j)], m, a, vector_bytes(yp[b], j, L))
                       for (b, j), (m, a) in self.manifest.outputs.items()),
                      key=lambda w: (w[0], self.program.config.position(w[1])))


@dataclass
class ResidentModel:
    """Every layer of a model on one tile: the combined queue images and memories."""
    config: TileConfig
    layers: list                   # ResidentLayer
    images: dict                   # slice -> 64-bit words: every layer's program at its entry
    memory: dict                   # slice -> (mem_depth, lanes) uint8: every layer's weights
    vxm_params: np.ndarray
    table: np.ndarray              # (vxm_tables, 256): layer l's activation table at l

    def job(self, layer: int, x_int8, name: str = "") -> dict:
        """A ``TileSim`` job for layer ``layer`` on input ``x`` (``sim.tb.driver``'s resident
        jobs: the first loads everything, the others only x, the entry and what changed)."""
        ly = self.layers[layer]
        return {"name": name or f"layer{layer}", "resident": True, "images": self.images,
                "memory_rows": ly.x_image(x_int8), "vxm_params": self.vxm_params.tolist(),
                "table": self.table.tolist(), "entry": ly.entry, "read_back": ly.y_rows(), "read_vxm": False,
                "timeout_cycles": 2 * ly.manifest.cycles + 10_000}

    def first_job_memory(self) -> dict:
        """Every nonzero weight row, for the first job (the weights' one load)."""
        return {m: {int(r): [int(v) for v in img[r]] for r in np.flatnonzero(img.any(axis=1))}
                for m, img in self.memory.items()}

    def loaded_bytes(self) -> dict:
        """What the resident model loads once, by kind (bytes as the host writes them)."""
        words = sum(len(w) for w in self.images.values())
        rows = sum(int(img.any(axis=1).sum()) for img in self.memory.values())
        return {"instructions": 8 * words, "weights": rows * self.config.lanes}


class LayerStack:
    """One tile's resident layers so far: the MEM rows and VXM parameter entries they take,
    the weights they leave and the activation tables (layer l's at l); each new layer's
    plan places onto a tile state that continues where they end (:meth:`state`)."""

    def __init__(self, cfg: TileConfig):
        self.cfg, self.n_params, self.params = cfg, 0, Program(cfg).vxm_params.copy()
        self.next_free = {m: 0 for m in cfg.mem_names}
        self.memory = {m: np.zeros((cfg.mem_depth, cfg.lanes), np.uint8) for m in cfg.mem_names}
        self.tables, self.n_tables = identity_tables(cfg), 0

    def state(self, own_tables: bool = False) -> TileState:
        """The tile state the next layer places onto: its own reservation table, queues and
        memory image, the rows and parameter entries from where the layers so far end (a
        copy: a layer that does not place leaves the stack as it was), the stack's tables
        (``own_tables``: a copy, for a layer that sets tables of its own numbering, a MoE
        layer's: :meth:`add_placed` renumbers them)."""
        return TileState(self.cfg, tables=self.tables.copy() if own_tables else self.tables,
                         next_free=dict(self.next_free), n_params=self.n_params, params=self.params.copy())

    def table_index(self, table, share: bool = False) -> int | None:
        """The stack's index of activation ``table``: with ``share``, a table the stack holds
        already if one is identical; else the next free one (None: all ``vxm_tables`` taken)."""
        t = table_bytes(table)
        if share:
            for k in range(self.n_tables):
                if (self.tables[k] == t).all():
                    return k
        if self.n_tables >= self.cfg.vxm_tables:
            return None
        self.tables[self.n_tables] = t
        self.n_tables += 1
        return self.n_tables - 1

    def check(self, plan: FfnPlan, l: int, where: str = "",
              advice: str = "use a larger mem_depth or fewer layers (a model that does not fit runs on the golden "
                            "model only)") -> None:
        """A CompileError unless layer ``l``'s plan (on :meth:`state`) fits after the layers so
        far, naming the limit its ``capacity_needs`` exceed there (``where``: e.g. " on tile 3")."""
        cfg, need = self.cfg, plan.capacity_needs()
        rows = max(self.next_free.values()) + need["mem_depth"]
        if rows > cfg.mem_depth:
            raise CompileError(f"layers 0..{l} need {rows} rows per weight slice{where} (layer {l}: "
                               f"{need['mem_depth']}); a MEM slice holds mem_depth = {cfg.mem_depth}: {advice}")
        if self.n_params + need["vxm_param_depth"] > cfg.vxm_param_depth:
            raise CompileError(f"layers 0..{l} need {self.n_params + need['vxm_param_depth']} VXM parameter "
                               f"entries{where}; the VXM has vxm_param_depth = {cfg.vxm_param_depth}")

    def add(self, state: TileState, l: int, table) -> None:
        """Take layer ``l``'s placement (the :meth:`state` its plan placed onto), its parameter
        entries naming activation ``table`` at the next free index (l, when every layer
        before it took one)."""
        k = self.table_index(table)
        if k is None:
            raise CompileError(f"layer {l} needs activation table {self.n_tables + 1}; the VXM has "
                               f"vxm_tables = {self.cfg.vxm_tables}")
        state.params[self.n_params:state.n_params, :, VXM_FIELDS.index("table")] = k
        self._take(state)

    def add_placed(self, state: TileState, tables: dict, share: bool, where: str) -> dict:
        """Take a placement whose new parameter entries name tables by a numbering of its own
        (``tables``: its number -> table, None for one no entry looks up), renumbered to the
        stack's (:meth:`table_index`; ``share``: identical tables are one).  Returns its
        number -> the stack's; too many tables is a CompileError naming ``where``."""
        field = VXM_FIELDS.index("table")
        index, before = {}, self.n_tables
        for k, table in sorted(tables.items()):
            index[k] = 0 if table is None else self.table_index(table, share)
            if index[k] is None:
                distinct = len({table_bytes(t).tobytes() for t in tables.values() if t is not None})
                raise CompileError(f"{where}: the layers before take {before} activation tables and this one has "
                                   f"{distinct} distinct ones of its own; the VXM has vxm_tables = "
                                   f"{self.cfg.vxm_tables}: quantise each MoE layer's experts with one activation "
                                   "table (tables='layer') or grow vxm_tables")
        new = state.params[self.n_params:state.n_params, :, field]
        renumbered = np.zeros_like(new)           # a number no table was given for: table 0
        for k, g in index.items():
            renumbered[new == k] = g
        new[...] = renumbered
        self._take(state)
        return index

    def _take(self, state: TileState) -> None:
        self.next_free, self.n_params, self.params = dict(state.next_free), state.n_params, state.params
        for m in self.memory:
            self.memory[m] |= state.memory[m]


def check_layers(specs: list, cfg: TileConfig) -> None:
    """A CompileError unless there is a layer and a VXM activation table for each."""
    if not specs:
        raise CompileError("a resident model needs at least one layer")
    if len(specs) > cfg.vxm_tables:
        raise CompileError(f"{len(specs)} layers need {len(specs)} activation tables (one each); the VXM has "
                           f"vxm_tables = {cfg.vxm_tables}")


def stack_images(cfg: TileConfig, images: list) -> tuple[list, list]:
    """Every layer's program in the same queues, one after the other: ``images[l]`` is layer
    l's queue images (``Program.images``) per tile, padded with HALT to its longest queue.
    Returns the combined images per tile and the instruction each layer begins at; more
    than a queue holds is a CompileError."""
    halt = Instr.halt().encode()
    out, entries, entry = [{n: [] for n in cfg.queue_names} for _ in images[0]], [], 0
    for per_tile in images:
        width = max(len(w) for imgs in per_tile for w in imgs.values())
        for img, imgs in zip(out, per_tile):
            for n in cfg.queue_names:
                img[n] += imgs[n] + [halt] * (width - len(imgs[n]))
        entries.append(entry)
        entry += width
    if entry > cfg.iq_depth:
        raise CompileError(f"the layers' programs need {entry} instructions per queue; a queue holds "
                           f"iq_depth = {cfg.iq_depth}")
    return out, entries


def compile_resident(specs: list, cfg: TileConfig | None = None, batch: int = 1) -> ResidentModel:
    """Place every layer's FFN (``specs``, one ``FfnSpec`` each) on one tile of ``cfg``;
    a model that does not fit is a CompileError naming what it needs and the limit."""
    cfg = cfg or TileConfig.default()
    check_layers(specs, cfg)
    stack, plans = LayerStack(cfg), []
    for l, spec in enumerate(specs):
        if not isinstance(spec, FfnSpec):
            what = ("a MoE layer: MoE layers are not placed resident beside others (sim.flows.decode.run_moe_tray runs "
                    "them on a tray, one layer at a time, on the golden model)") if type(spec).__name__ == "MoeSpec" \
                else f"expected a numerics.FfnSpec, got {type(spec).__name__}"
            raise CompileError(f"layer {l}: {what}")
        try:
            plan = FfnPlan(cfg, spec, np.zeros((batch, spec.H), np.int64), state=stack.state())
        except (NumericsError, CompileError) as e:
            raise CompileError(f"layer {l}: {e}") from None
        stack.check(plan, l)
        stack.add(plan.compile().state, l, spec.table)
        plans.append(plan)
    progs = [plan.program() for plan in plans]        # (every layer's table in the stack's, shared)
    images, entries = stack_images(cfg, [[prog.images()] for prog in progs])
    layers = []
    for l, (plan, prog) in enumerate(zip(plans, progs)):
        prog.memory, prog.vxm_params = stack.memory, stack.params
        layers.append(ResidentLayer(l, specs[l], prog, plan.manifest(prog), entries[l], list(plan.x_rows),
                                    cfg.lanes, {k: v[2] for k, v in plan.outputs.items()}))
    return ResidentModel(cfg, layers, images[0], stack.memory, stack.params, stack.tables)


def run_layer(model: ResidentModel, layer: int, x_int8, memory: dict | None = None):
    """Layer ``layer`` on the golden model from MEM contents ``memory`` (default: the
    model's images) with its x written: ``(RunResult, y int8 (B, H))``.  The RunResult's
    ``memory`` is the tile's after the run (the next layer starts from it)."""
    ly = model.layers[layer]
    mem = with_x(memory or model.memory, ly.x_rows, x_int8, model.config.lanes, ly.spec.H)
    res = archmodel.run(Program(model.config, ly.program.queues, mem, model.vxm_params, model.table,
                                ly.program.defined))
    return res, ly.y_from(res.memory)
