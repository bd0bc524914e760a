"""Every layer of a model resident on a tray: dense FFNs and mixture-of-experts layers
(the LPX's steady state, ``docs/afd.md`` and ``docs/moe.md``).

Each tile holds its share of every layer, laid out one after the other as
``resident.compile_resident`` does on one tile (``resident.LayerStack``): a dense layer's
share of its FFN (``tray.plan_tray``), a MoE layer's routed experts, its slots and its share
of the shared expert (``moe_tray.MoeTray`` with capacity ``min(top_k, experts per tile)``,
so every routing runs in one round).  Every layer's program sits in the same queues at its
own entry point.  Loaded once, the tray then runs layer after layer with only x, the
routing (base registers) and the entry written per run.

Activation tables: a dense layer takes a table of its own; a MoE layer's experts and shared
expert take one each, except that with ``share_tables`` (the default) a table identical to
one the tile holds already is that one.  Experts quantised with one activation scale per
layer (``MoeSpec.from_float(..., tables="layer")``) so share one table per layer.  More
tables than ``vxm_tables`` is a ``CompileError`` naming the tile and the layer.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np

from lpu_arch.config import TileConfig

from firmware_gen.compiler import CompileError
from firmware_gen.compiler.blocks import pad
from firmware_gen.compiler.moe_tray import MoeTray
from firmware_gen.compiler.resident import LayerStack, check_layers, stack_images
from firmware_gen.compiler.tray import TrayLayer, _compile_tray, tray_config
from firmware_gen.golden.moe import MoeSpec
from firmware_gen.golden.numerics import FfnSpec, NumericsError
from firmware_gen.program import Program


@dataclass
class ResidentMoeLayer(TrayLayer):
    """A MoE layer resident on a tray: ``programs`` (per tile, over the tray's shared
    memories, parameters and tables), ``manifest`` (its ``MoeManifest``) and ``x_rows`` as a
    dense :class:`tray.TrayLayer`'s; ``tray``, the placed layer compiled for x = 0
    (its rounds, base registers and outputs: :meth:`for_input` for one token's predictions)."""
    tray: MoeTray = None

    def for_input(self, x_int8) -> MoeTray:
        """The layer's schedule predicting for tokens ``x`` ((H,) or (T, H) int8, as many as
        compiled): a copy whose ``predict``, ``promised`` and ``round_problems`` are x's."""
        x = np.atleast_2d(np.asarray(x_int8, np.int64))
        mt = copy.copy(self.tray)
        mt.x = x
        mt.hosts = [copy.copy(f) for f in self.tray.hosts]
        for f in mt.hosts:
            f.x = pad(x, (x.shape[0], f.Hp))
        return mt


@dataclass
class ResidentTray:
    """Every layer of a model resident on a tray; ``layers[l]``: layer l's queues alone over
    the tiles' shared memories, parameters and tables (a :class:`tray.TrayLayer`, or a
    :class:`ResidentMoeLayer`)."""
    layers: list                   # TrayLayer or ResidentMoeLayer per layer
    entries: list                  # the instruction layer l begins at, on every tile and queue
    images: list                   # per tile: queue name -> 64-bit words of every layer
    memory: list                   # per tile: slice -> (mem_depth, lanes) uint8, every layer's weights
    rows: list                     # per tile: slice -> rows the layers use (weights and x)
    tables: list                   # per tile: the activation tables its layers use
    params: list                   # per tile: the VXM parameter entries its layers use

    def weight_bytes(self) -> int:
        """Bytes of the MEM rows every layer uses on every tile (weights and x's rows),
        loaded once."""
        lanes = self.layers[0].programs[0].config.lanes
        return sum(n for per_tile in self.rows for n in per_tile.values()) * lanes

    def summary(self) -> dict:
        """What the tray holds: rows, parameter entries and tables per tile, against the limits."""
        cfg = self.layers[0].programs[0].config
        return {"layers": len(self.layers), "tiles": len(self.memory), "weight_bytes": self.weight_bytes(),
                "rows": max(max(r.values()) for r in self.rows), "mem_depth": cfg.mem_depth,
                "params": max(self.params), "vxm_param_depth": cfg.vxm_param_depth,
                "tables": max(self.tables), "vxm_tables": cfg.vxm_tables}


def _dense(stacks, spec: FfnSpec, cfg, tiles: int, l: int) -> TrayLayer:
    def check(tr):
        for t, f in enumerate(tr.plans):
            stacks[t].check(f, l, f" on tile {t}", "use more tiles, a larger mem_depth or fewer layers")
    layer, tr = _compile_tray(spec, np.zeros((1, spec.H), np.int64), cfg, tiles,
                              states=lambda: [stack.state() for stack in stacks], prepare=check)
    for stack, f in zip(stacks, tr.plans):
        stack.add(f.state, l, spec.table)
    return layer


def _moe(stacks, spec: MoeSpec, cfg, tiles: int, l: int, capacity: int | None, share: bool) -> ResidentMoeLayer:
    c = capacity if capacity is not None else min(spec.top_k, max(1, spec.E // tiles))
    x0 = np.zeros((1, spec.H), np.int64)
    try:
        mt = MoeTray(spec, x0, cfg, tiles, c, "ep", states=lambda: [stack.state(own_tables=True) for stack in stacks])
        progs = mt.programs()
    except NumericsError as e:
        raise CompileError(str(e)) from None
    for t, (stack, f) in enumerate(zip(stacks, mt.hosts)):
        local = {0: spec.shared[0].table if spec.shared else None}
        local.update({1 + le: spec.experts[e].table for le, e in enumerate(mt.layouts[t].experts)})
        stack.add_placed(f.state, local, share, f"layer {l} on tile {t}")
    return ResidentMoeLayer(spec, progs, mt.manifest(), [list(f.x_rows) for f in mt.hosts], tray=mt)


def compile_resident_tray(specs: list, cfg: TileConfig | None = None, tiles: int = 8, capacity: int | None = None,
                          share_tables: bool = True) -> ResidentTray:
    """Place every layer (``specs``: dense ``FfnSpec`` or ``MoeSpec``) resident on a tray of
    ``tiles`` tiles; a model that does not fit is a ``CompileError`` naming the limit, the
    tile and the layer.  ``capacity``: a MoE layer's slots per tile and token (default:
    ``min(top_k, experts per tile)``, one round for every routing)."""
    cfg = cfg or TileConfig.default()
    if all(isinstance(s, FfnSpec) for s in specs):
        check_layers(specs, cfg)
    elif not specs:
        raise CompileError("a resident model needs at least one layer")
    tcfg = tray_config(cfg, tiles)
    stacks = [LayerStack(tcfg) for _ in range(tiles)]
    compiled = []
    for l, spec in enumerate(specs):
        try:
            if isinstance(spec, FfnSpec):
                compiled.append(_dense(stacks, spec, cfg, tiles, l))
            elif isinstance(spec, MoeSpec):
                compiled.append(_moe(stacks, spec, cfg, tiles, l, capacity, share_tables))
            else:
                raise CompileError(f"expected a numerics.FfnSpec or a moe.MoeSpec, got {type(spec).__name__}")
        except CompileError as e:
            msg = str(e)
            raise CompileError(msg if msg.startswith(f"layer {l}") else f"layer {l}: {msg}") from None
    images, entries = stack_images(tcfg, [[p.images() for p in ly.programs] for ly in compiled])
    layers = [dataclasses.replace(ly, programs=[Program(tcfg, p.queues, st.memory, st.params, st.tables, p.defined)
                                                for p, st in zip(ly.programs, stacks)]) for ly in compiled]
    return ResidentTray(layers, entries, images, [st.memory for st in stacks], [dict(st.next_free) for st in stacks],
                        [st.n_tables for st in stacks], [st.n_params for st in stacks])
