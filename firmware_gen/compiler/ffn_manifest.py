"""What the FFN compiler promises (``docs/compiler.md``): the :class:`Manifest` of every
output write and the totals, the bounds no schedule of the FFN on the tile can beat
(:data:`BOUNDS`, :func:`ffn_bounds`), and y read back from the MEM contents at the places
the manifest names (:func:`output_matrix`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import MXM_LATENCY, READ_LATENCY
from lpu_arch.timing import last_arrival, lw_cycles, read_lead
from firmware_gen.compiler.blocks import gather_blocks


@dataclass
class Manifest:
    """What the compiler promises: every output write and the totals, plus the bounds."""
    kind: str
    H: int
    I: int
    batch: int
    padded: tuple                     # (Hp, Ip)
    cycles: int                       # predicted cycle counter at done
    writes: list                      # PredictedWrite, (cycle, position) order
    outputs: dict                     # (b, block) -> (slice, addr) of y's vector
    busy: dict                        # predicted data-instruction issues per slice
    mm_count: int
    weight_vectors: int
    sram_bound: int                   # cycles to read every weight vector once, all MEM slices busy
    mac_bound: int                    # cycles for every MM with both MXMs busy
    instructions: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)    # every limit by name (BOUNDS), cycles
    sram_padded: int = 0                          # reading every padded block once (a reference, not a bound
                                                  # when the program skips rows: FfnPlan.block_rows)
    dtype: str = "int8"                           # the tile's number format: y is int8, or E4M3 codes

    @property
    def bound(self) -> int:
        return max(self.bounds.values(), default=max(self.sram_bound, self.mac_bound))

    @property
    def tightest(self) -> str:
        """The name of the bound that limits this FFN most (BOUNDS)."""
        return max(self.bounds, key=self.bounds.get) if self.bounds else "sram"

    @property
    def efficiency(self) -> float:
        """bound / cycles (1.0 = the configuration's limit)."""
        return self.bound / self.cycles

    @property
    def mxm_utilisation(self) -> float:
        return self.mm_count / (2 * self.cycles)

    def summary(self) -> dict:
        return {"kind": self.kind, "dtype": self.dtype, "H": self.H, "I": self.I, "batch": self.batch,
                "padded_H": self.padded[0], "padded_I": self.padded[1], "cycles": self.cycles,
                "sram_bound": self.sram_bound, "sram_padded": self.sram_padded, "mac_bound": self.mac_bound,
                "efficiency": round(self.efficiency, 4), "bounds": self.bounds, "tightest_bound": self.tightest,
                "ratio_to_sram_bound": round(self.cycles / self.sram_bound, 4),
                "mxm_utilisation": round(self.mxm_utilisation, 4), "mm_count": self.mm_count,
                "weight_vectors": self.weight_vectors, "output_writes": len(self.writes),
                "instructions": self.instructions, "busy": self.busy}


# What each bound counts (cycles no schedule of this FFN on this tile can beat).
BOUNDS = {
    "sram": "every weight vector the program reads read once (padded blocks, less the rows of partial W1/W3 "
            "blocks it does not load), all MEM slices every cycle",
    "sram_real": "the same for the FFN's real (unpadded) weight bytes",
    "weight_load": "every weight block loaded into an MXM (LW: ceil(rows/n) cycles on n streams), both MXMs",
    "mac": "every MM issued, both MXMs every cycle",
    "loader_issue": "every LW, and each x and h vector's LX into both MXMs, one per loader issue slot",
    "streams": "the weights crossing the busiest position (next to an MXM) on its streams",
    "latency": "the dataflow's fixed fill and drain: weights to an MXM, h and back, y to MEM",
    "sram_path": "every weight vector read from cycle 0 on, one per MEM slice per cycle, and carried to its MXM "
                 "(each slice its distance away): the last arrives no earlier than the slices could deliver them all; "
                 "then one MM and its result through the VXM to MEM",
}


def ffn_bounds(cfg: TileConfig, n: int, mats: int, H: int, I: int, KH: int, KI: int, B: int,
               tiles: int = 1, partial: bool = False) -> dict:
    """Every bound (BOUNDS) of ``mats`` H x I matrices (KH x KI blocks) at batch B on a
    tile with ``n`` weight streams per MXM, for one tile's 1/``tiles`` share: arithmetic
    on the configuration, not on a schedule.  ``partial``: the W1/W3 blocks past I load
    only I's rows (``FfnPlan.block_rows``)."""
    L, pos = cfg.lanes, cfg.position
    blocks = mats * KH * KI                        # weight blocks of L x L, L vectors each
    short = (mats - 1) * KH if partial and I % L else 0          # W1/W3 blocks of I % L rows
    vectors = blocks * L - short * (L - I % L)
    load = blocks * lw_cycles(L, n) - short * (lw_cycles(L, n) - lw_cycles(I % L or L, n))
    leads = sorted(read_lead(cfg, m, "MXM_W") for m in cfg.mem_names if m.startswith("MEM_W"))
    d_mem = leads[0] - READ_LATENCY
    d_vxm = abs(pos("MXM_W") - cfg.vxm_position)
    d_y = min(abs(cfg.vxm_position - pos(m)) for m in cfg.mem_names)      # the VXM's result to MEM
    out = MXM_LATENCY + d_vxm + cfg.vxm_latency    # MM issue to its VOP's result at the VXM
    return {"sram": -(-vectors // (2 * cfg.mem_slices * tiles)),
            "sram_real": -(-(-(-mats * H * I // L)) // (2 * cfg.mem_slices * tiles)),
            "weight_load": -(-load // (2 * tiles)),
            "mac": -(-blocks * B // (2 * tiles)),
            "loader_issue": -(-blocks // (2 * tiles)) + B * (KH + KI),
            "streams": -(-vectors // (2 * cfg.streams * tiles)),
            # first MM (a weight block read and loaded), h back to an MXM, y to MEM and done
            "latency": (READ_LATENCY + d_mem + lw_cycles(L, n)) + (out + d_vxm + 1) + (out + d_y + 2),
            # the busiest MXM's last weight row arrives on last_arrival at the earliest, the MM on
            # the next cycle (the swap), its chain's result to MEM and done
            "sram_path": last_arrival(leads, -(-vectors // (2 * tiles)) if short else -(-blocks // (2 * tiles)) * L)
            + 1 + (out + d_y + 2)}


def output_matrix(manifest: Manifest, memory: dict, lanes: int, H: int, dtype: str | None = None) -> np.ndarray:
    """Gather y (batch, H) from final MEM contents using the manifest's locations: int8,
    or E4M3 codes (uint8) on an FP8 tile (``dtype``, default the manifest's)."""
    dtype = dtype or manifest.dtype
    out = gather_blocks(np.zeros((manifest.batch, manifest.padded[0]), np.uint8), manifest.outputs, memory, lanes)
    return out[:, :H] if dtype == "fp8" else out[:, :H].astype(np.int8)
