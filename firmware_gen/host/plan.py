"""``lpu plan``: what a model's FFN side needs on LP30-scale hardware (``docs/plan.md``).

For a model (a built-in description, :mod:`firmware_gen.host.models`, or a Hugging Face
``config.json``, each read by :mod:`firmware_gen.host.model_arch`) and a weight format, this
module counts the FFN and MoE parameters (:func:`count_params`; the arithmetic is
``docs/plan.md``, "Parameter arithmetic"), their bytes, the chips, trays and racks that hold
them in SRAM, and the per-token decode time of the FFN side: one compiled expert (or dense
layer share) per layer, plus the C2C hops the placement needs.  Every number says where it
comes from: counted, compiled and golden-model-checked, compiled (cycles predicted by the
compiler, ``--no-golden``) or analytic (arithmetic on stated figures).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from lpu_arch import c2c
from lpu_arch.config import PRESET_CLOCK_MHZ, TileConfig
from lpu_arch.errors import LpuError

from firmware_gen.golden import archmodel
from firmware_gen.host.model_arch import Arch, Attention
from firmware_gen.compiler import CompileError
from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_manifest import output_matrix
from firmware_gen.compiler.tile_plan import weight_streams
from firmware_gen.golden.numerics import FfnSpec, activation_table, ffn_int, quantise_scale

# ---- figures --------------------------------------------------------------------------------
DEFAULT_CONFIG = "lp30"         # the TileConfig preset experts are compiled on (``--config``)
CLOCK_MHZ = 900.0               # TSP v1's clock (design brief): times of a tile that is not a preset

# LP30 / LPX public figures (design brief, section 5).
LP30_SRAM_BYTES = 500_000_000           # SRAM per chip
LP30_SRAM_BW = 150e12                   # SRAM bandwidth per chip, bytes/s
LP30_FP8_FLOPS = 1.2e15                 # FP8 per chip
CHIPS_PER_TRAY = 8
TRAYS_PER_RACK = 32
CHIPS_PER_RACK = CHIPS_PER_TRAY * TRAYS_PER_RACK      # 256 chips, 128 GB SRAM per rack
RACK_SCALE_UP_BW = 640e12                             # bytes/s per rack
LINK_BW = RACK_SCALE_UP_BW / CHIPS_PER_RACK           # a chip's share: 2.5 TB/s

# Bytes per weight in each format and whether its time is compiled or analytic.
DTYPES = {
    "fp8": (1.0, "1 byte per weight (E4M3; block scales not counted); timed on the int8 datapath, 1 byte per weight"),
    "int8": (1.0, "1 byte per weight (scales not counted); the compiled int8 datapath"),
    "bf16": (2.0, "2 bytes per weight; time analytic: twice the int8 schedule's cycles (every weight vector "
                  "twice the bytes through the same SRAM reads, streams and MXM loads)"),
    "int4": (0.5, "0.5 byte per weight (group scales not counted); time analytic: the int8 schedule's cycles "
                  "times 0.5, as if a 4-bit datapath moved the same bytes per cycle (the tile has none)"),
    "mxfp4": (4.25 / 8, "4.25 bits per weight (OCP MX: 32 FP4 E2M1 values share one 8-bit scale); time analytic: "
                        "the int8 schedule's cycles times 4.25/8, as if an MXFP4 datapath moved the same bytes per "
                        "cycle (the tile has none)"),
}
COMPILED_DTYPES = ("fp8", "int8")

PLACEMENT_RULE = (
    "whole experts: each routed or shared expert sits in one chip's SRAM, never split; unit n (layers in "
    "order, in a layer its routed then shared experts) goes to expert chip n mod C, C = max(E + S, "
    "ceil(units / experts per chip)), so the E + S experts of a layer are on E + S different chips and the "
    "experts a token activates in a layer run in parallel: a layer takes one expert's time.  A dense FFN "
    "layer larger than a chip is split over ceil(bytes / chip SRAM) chips by its intermediate dimension "
    "(each chip an H x I/m SwiGLU share, run in parallel); smaller ones are packed whole, on their own "
    "chips.  Routers run on the attention side (docs/moe.md) and are not placed.")

HOP_RULE = (
    "per layer, x travels from the layer's first chip to the farthest chip holding the layer's FFN and the "
    "outputs travel back: 2 x (1 hop within a tray (all-to-all, lpu_arch/topology.py), 2 within a rack, "
    "3 between racks; 0 when the layer is on one chip); the rack's and the racks' topology is not public: "
    "the 2 and 3 are assumptions.  A hop takes the link budget of lpu_arch/c2c.py without the vector's "
    "serialisation (send start, the declared maximum wire latency, the receive pipeline, skew) at the clock, "
    "plus H bytes at a chip's share of the rack's public scale-up bandwidth (640 TB/s / 256 chips = 2.5 TB/s). "
    "The GPU-LPX transfer and the attention are not part of the FFN time.")


class PlanError(LpuError, ValueError):
    """Bad input: the message names the problem (one line)."""


# ---- parameter counts ---------------------------------------------------------------------------
def attention_params(a: Attention, H: int) -> int:
    if a.kind == "mla":
        n, qk = a.heads, a.qk_nope_head_dim + a.qk_rope_head_dim
        q = H * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * n * qk if a.q_lora_rank else H * n * qk
        kv = H * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank \
            + a.kv_lora_rank * n * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv + n * a.v_head_dim * H
    n, k, d = a.heads, a.kv_heads, a.head_dim
    p = H * n * d + 2 * H * k * d + n * d * H
    p += (n + 2 * k) * d if a.qkv_bias else 0
    p += H if a.o_bias else 0
    p += {"none": 0, "per_head": 2 * d, "per_layer": (n + k) * d}[a.qk_norm]
    return p + (n if a.sinks else 0)


def expert_params(arch: Arch, I: int) -> int:
    """One SwiGLU expert of intermediate size ``I`` (with its biases where the model has them)."""
    return 3 * arch.hidden * I + ((2 * I + arch.hidden) if arch.expert_bias else 0)


def moe_layer_ffn(arch: Arch) -> dict:
    return {"routed_experts": arch.experts * expert_params(arch, arch.expert_intermediate),
            "shared_experts": arch.shared_experts * expert_params(arch, arch.shared_intermediate),
            "routers": arch.experts * (arch.hidden + arch.router_bias)}     # E x H, and E with a routing bias


def count_params(arch: Arch) -> dict:
    """Every parameter by kind (``docs/plan.md``, "Parameter arithmetic"); ``total``,
    ``main`` (without the MTP layers), ``ffn`` and ``ffn_share``."""
    H = arch.hidden
    att = attention_params(arch.attention, H)
    per_moe = moe_layer_ffn(arch)
    dense = 3 * H * arch.dense_intermediate
    out = {
        "embedding": arch.vocab * H,
        "lm_head": 0 if arch.tie_embeddings else arch.vocab * H,
        "attention": arch.layers * att,
        "norms": arch.layers * 2 * H + H,
        "dense_ffn": arch.dense_layers * dense,
        **{k: arch.moe_layers * n for k, n in per_moe.items()},     # routed_experts, shared_experts, routers
    }
    # MTP layers: a decoder layer of the MoE kind (dense if the model has no MoE layer)
    mtp_ffn = sum(per_moe.values()) if arch.moe else dense
    out["mtp_ffn"] = arch.mtp_layers * mtp_ffn
    out["mtp_other"] = arch.mtp_layers * (att + 2 * H + 3 * H + 2 * H * H)
    total = sum(out.values())
    ffn = out["dense_ffn"] + out["routed_experts"] + out["shared_experts"] + out["routers"] + out["mtp_ffn"]
    return {**out, "total": total, "main": total - out["mtp_ffn"] - out["mtp_other"], "ffn": ffn,
            "ffn_share": ffn / total}


# ---- placement ----------------------------------------------------------------------------------
def _span(chips) -> int:
    """Hops from the first of ``chips`` to the farthest: 0 (one chip), 1 (one tray), 2 (one
    rack), 3 (several racks)."""
    chips = list(chips)
    if len(set(chips)) == 1:
        return 0
    if len({c // CHIPS_PER_TRAY for c in chips}) == 1:
        return 1
    return 2 if len({c // CHIPS_PER_RACK for c in chips}) == 1 else 3


def place(arch: Arch, bytes_per_weight: float, chip_bytes: int = LP30_SRAM_BYTES) -> dict:
    """Chips, trays and racks holding the FFN weights (:data:`PLACEMENT_RULE`), the dense
    layers' split and every layer's hop class (:data:`HOP_RULE`)."""
    moe_layers = arch.moe_layers + (arch.mtp_layers if arch.moe else 0)
    dense_layers = arch.dense_layers + (0 if arch.moe else arch.mtp_layers)
    # dense layers first, on chips 0..
    dense_chips, split, per_chip_dense = 0, 1, 0
    if dense_layers:
        d = 3 * arch.hidden * arch.dense_intermediate * bytes_per_weight
        if d > chip_bytes:
            split = math.ceil(d / chip_bytes)
            dense_chips = dense_layers * split
        else:
            per_chip_dense = int(chip_bytes // d)
            dense_chips = math.ceil(dense_layers / per_chip_dense)
    hops_dense = [_span(range(i * split, (i + 1) * split)) for i in range(dense_layers)]
    # experts after them
    expert_chips, per_chip, hops_moe = 0, 0, []
    if arch.moe:
        U = arch.experts + arch.shared_experts
        e = max(expert_params(arch, arch.expert_intermediate),
                expert_params(arch, arch.shared_intermediate) if arch.shared_experts else 0) * bytes_per_weight
        if e > chip_bytes:
            raise PlanError(f"{arch.name}: one expert needs {e / 1e6:.0f} MB, more than a chip's "
                            f"{chip_bytes / 1e6:.0f} MB of SRAM; this placement keeps experts whole")
        per_chip = int(chip_bytes // e)
        expert_chips = max(U, math.ceil(moe_layers * U / per_chip))
        for layer in range(moe_layers):
            hops_moe.append(_span(dense_chips + (layer * U + j) % expert_chips for j in range(U)))
    chips = dense_chips + expert_chips
    per_moe = moe_layer_ffn(arch)
    placed = (moe_layers * (per_moe["routed_experts"] + per_moe["shared_experts"])
              + dense_layers * 3 * arch.hidden * arch.dense_intermediate) * bytes_per_weight
    return {"rule": PLACEMENT_RULE, "chip_sram_bytes": chip_bytes,
            "chips": chips, "trays": math.ceil(chips / CHIPS_PER_TRAY), "racks": math.ceil(chips / CHIPS_PER_RACK),
            "dense_chips": dense_chips, "expert_chips": expert_chips, "experts_per_chip": per_chip,
            "dense_split": split, "dense_layers_per_chip": per_chip_dense,
            "capacity_bound_chips": math.ceil(placed / chip_bytes), "placed_bytes": placed,
            "hops_dense": hops_dense, "hops_moe": hops_moe}


# ---- timing -------------------------------------------------------------------------------------
@dataclass
class Timed:
    """The compiled time of one H x I SwiGLU on one chip of the preset."""
    H: int
    I: int
    pieces: int                    # compiled as this many H x I/pieces pieces back to back
    piece_I: int
    piece_cycles: int
    cycles: int                    # pieces * piece_cycles
    tightest_bound: str
    source: str                    # 'compiled and golden-model-checked' | 'compiled (cycles predicted by the compiler)'
    golden: str = "not run"        # 'cycles and output match' | 'not run'
    seconds: float = 0.0
    sram_bound: int = 0            # one piece's `sram` bound (compile_ffn.BOUNDS)


def synthetic_swiglu(H: int, I: int, seed: int = 0):
    """A SwiGLU ``FfnSpec`` of random int8 weights (uniform in -32..32) and an int8 input,
    with requantisation scales that keep every stage's int8 values spread out rather than
    saturated: the schedule does not depend on the values, the golden-model check compares
    them bit for bit.  (``example_ffn`` quantises float weights: seconds longer at these sizes.)"""
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.integers(-32, 33, size=shape, dtype=np.int8)
    W1, W3, W2 = w(I, H), w(I, H), w(H, I)
    x = rng.integers(-48, 49, size=H, dtype=np.int8)
    sd_w, sd_x, target = 19.0, 28.0, 24.0                  # uniform -32..32 and -48..48; aim for int8 sd 24
    rq1 = rq3 = quantise_scale(target / (math.sqrt(H) * sd_w * sd_x))
    table = activation_table("silu", 4.0 / 128, 1.0 / 32)  # int8 in (-4, 4) to silu in units of 1/32
    rq_mul = quantise_scale(1.0 / 16)
    rq2 = quantise_scale(target / (math.sqrt(I) * sd_w * 12.0))
    spec = FfnSpec("swiglu", W1, W2, table, rq1, rq2, W3=W3, rq3=rq3, rq_mul=rq_mul)
    return spec, x


class Timer:
    """Compiles SwiGLU shapes on ``cfg`` once each (a cache per (H, I) within a run)."""

    def __init__(self, cfg, golden: bool = True, progress=None):
        self.cfg, self.golden, self.progress = cfg, golden, progress
        self.cache: dict = {}

    def time(self, H: int, I: int) -> Timed:
        if (H, I) not in self.cache:
            self.cache[H, I] = self._compile(H, I)
        return self.cache[H, I]

    def max_hidden(self) -> int:
        """The largest H an H x I SwiGLU can have on this tile whatever I: even at the
        narrowest I (one block of lanes) every block of H needs an x slot per MXM and a VXM
        parameter entry, beside the one of I's block."""
        return self.cfg.lanes * (min(self.cfg.mxm_xbuf_depth, self.cfg.vxm_param_depth) - 1)

    def _compile(self, H: int, I: int) -> Timed:
        cfg = self.cfg
        L = cfg.lanes
        if H > self.max_hidden():
            raise PlanError(f"hidden size {H:,} is more than this tile compiles: an H x I SwiGLU needs ceil(H / {L}) "
                            f"+ 1 x slots per MXM and VXM parameter entries, the tile has {cfg.mxm_xbuf_depth} and "
                            f"{cfg.vxm_param_depth}: H can be at most {self.max_hidden():,}")
        Hp = -(-H // L) * L
        # the fewest pieces that compile, from a lower bound: the weight slices full of weights (the
        # MEM slices an MXM loads from, weight_streams per hemisphere, times depth and lanes; only the
        # first guess: the compiler decides)
        pieces = max(1, math.ceil(3 * Hp * I / (2 * weight_streams(cfg) * cfg.mem_depth * L)))
        while True:
            piece_I = -(-I // pieces)
            t0 = time.time()
            try:
                cycles, tight, golden, sram = self._compile_piece(H, piece_I)
            except CompileError as e:
                if "does not fit the tile's SRAM" not in str(e) or piece_I <= L:
                    raise PlanError(f"H={H}, I={piece_I} does not compile on this tile: {e}") from None
                pieces += 1
                continue
            src = "compiled and golden-model-checked" if golden == "cycles and output match" \
                else "compiled (cycles predicted by the compiler)"
            if pieces > 1:
                src += f"; {pieces} pieces of H x {piece_I} back to back (sum: analytic)"
            return Timed(H, I, pieces, piece_I, cycles, pieces * cycles, tight, src, golden, round(time.time() - t0, 2),
                         sram)

    def _compile_piece(self, H: int, I: int):
        if self.progress:
            self.progress(f"compiling a SwiGLU H={H}, I={I} on the tile")
        spec, x = synthetic_swiglu(H, I)
        prog, man = compile_ffn(spec, x, self.cfg)
        golden = "not run"
        if self.golden:
            if self.progress:
                self.progress(f"running H={H}, I={I} on the golden model ({man.cycles} cycles)")
            gold = archmodel.run(prog)
            y = output_matrix(man, gold.memory, self.cfg.lanes, H)
            same = np.array_equal(y, ffn_int(spec, x.reshape(1, -1)))
            if gold.cycles != man.cycles or not same:
                raise PlanError(f"golden-model check failed for H={H}, I={I}: {gold.cycles} cycles, compiler "
                                f"{man.cycles}, output {'equal' if same else 'different'} to numerics.ffn_int")
            golden = "cycles and output match"
        return man.cycles, man.tightest, golden, man.bounds["sram"]


def hop_seconds(cfg, H: int, clock_mhz: float, hop_ns: float | None = None) -> tuple[float, dict]:
    """One hop (:data:`HOP_RULE`): the fixed latency and the serialisation of ``H`` bytes."""
    fixed_cycles = c2c.min_distance(cfg) - cfg.flits_per_vector
    fixed = hop_ns * 1e-9 if hop_ns is not None else fixed_cycles / (clock_mhz * 1e6)
    ser = H / LINK_BW
    return fixed + ser, {"fixed_ns": round(fixed * 1e9, 3), "fixed_cycles": None if hop_ns is not None else fixed_cycles,
                         "serialisation_ns": round(ser * 1e9, 3), "link_bytes_per_s": LINK_BW,
                         "source": "analytic: " + ("--hop-ns" if hop_ns is not None else
                                                   "lpu_arch/c2c.py link budget at the clock")
                         + " + H bytes at 640 TB/s / 256 chips"}


# ---- the plan -----------------------------------------------------------------------------------
def dtype_figures(dtype: str) -> tuple[float, str]:
    """Bytes per weight of the weight format ``dtype`` and what its time is (:data:`DTYPES`)."""
    if dtype not in DTYPES:
        raise PlanError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _units_time(arch: Arch, timer: Timer, split: int, dtype: str):
    """(dense layer time, MoE layer time) in cycles of the int8 datapath, scaled for the
    dtype, and the Timed records."""
    factor = 1.0 if dtype in COMPILED_DTYPES else DTYPES[dtype][0]
    rec, dense_c, moe_c = [], 0, 0
    if arch.dense_layers or (arch.mtp_layers and not arch.moe):
        t = timer.time(arch.hidden, -(-arch.dense_intermediate // split))
        rec.append(("dense" if split == 1 else f"dense, 1/{split} share", t))
        dense_c = t.cycles * factor
    if arch.moe:
        t = timer.time(arch.hidden, arch.expert_intermediate)
        rec.append(("routed expert", t))
        moe_c = t.cycles * factor
        if arch.shared_experts and arch.shared_intermediate != arch.expert_intermediate:
            ts = timer.time(arch.hidden, arch.shared_intermediate)
            rec.append(("shared expert", ts))
            moe_c = max(moe_c, ts.cycles * factor)
    return dense_c, moe_c, rec


def plan(arch: Arch, dtype: str = "fp8", cfg=None, config_name: str = DEFAULT_CONFIG, timer: Timer | None = None,
         clock_mhz: float = CLOCK_MHZ, hop_ns: float | None = None, title: str | None = None,
         sources=(), published=None) -> dict:
    """The whole plan of one model as a JSON-able dict (``--json``)."""
    bpw, dtype_note = dtype_figures(dtype)
    cfg = cfg or TileConfig.preset(config_name)
    timer = timer or Timer(cfg)
    params = count_params(arch)
    pl = place(arch, bpw)
    dense_c, moe_c, rec = _units_time(arch, timer, pl["dense_split"], dtype)
    hop_s, hop_info = hop_seconds(cfg, arch.hidden, clock_mhz, hop_ns)
    f = clock_mhz * 1e6
    main_dense = arch.dense_layers
    compute_s = (main_dense * dense_c + arch.moe_layers * moe_c) / f
    hops_main = sum(pl["hops_dense"][:main_dense]) + sum(pl["hops_moe"][:arch.moe_layers])
    hops_s = 2 * hops_main * hop_s
    # the MTP layers: the placement's layers after the main ones (0 of them: 0.0)
    mtp_hops = sum(pl["hops_moe"][arch.moe_layers:]) if arch.moe else sum(pl["hops_dense"][main_dense:])
    mtp_s = arch.mtp_layers * (moe_c if arch.moe else dense_c) / f + 2 * mtp_hops * hop_s
    # the bound at LP30's public SRAM bandwidth: each layer's busiest chip reads its weights once
    e_w = expert_params(arch, max(arch.expert_intermediate, arch.shared_intermediate)) if arch.moe else 0
    e_bytes = e_w * bpw if arch.moe else 0
    d_bytes = 3 * arch.hidden * arch.dense_intermediate * bpw / pl["dense_split"]
    bw_s = (main_dense * d_bytes + arch.moe_layers * e_bytes) / LP30_SRAM_BW
    # and at its public FP8 rate: 2 operations per weight of each layer's busiest chip
    flop_s = 2 * (main_dense * 3 * arch.hidden * arch.dense_intermediate / pl["dense_split"]
                  + arch.moe_layers * e_w) / LP30_FP8_FLOPS
    srcs = " and ".join(sorted({t.source.split(";")[0] for _, t in rec}))
    pieces = "".join(f"; {what}: {t.pieces} pieces summed (analytic)" for what, t in rec if t.pieces > 1)
    analytic = f"analytic ({dtype}: no such datapath; the int8 schedule scaled, {srcs}{pieces})"
    time_source = (srcs + pieces if dtype in COMPILED_DTYPES else analytic) + "; C2C hops analytic"
    units = [{"unit": what, "H": t.H, "I": t.I, "pieces": t.pieces, "piece_I": t.piece_I,
              "piece_cycles": t.piece_cycles, "cycles_int8": t.cycles, "tightest_bound": t.tightest_bound,
              "piece_sram_bound": t.sram_bound, "source": t.source, "golden_model": t.golden, "compile_and_check_s": t.seconds} for what, t in rec]
    return {
        "model": arch.name, "title": title or arch.name, "dtype": dtype, "dtype_note": dtype_note,
        "config": config_name, "clock_mhz": clock_mhz, "sources": list(sources),
        "architecture": {k: v for k, v in asdict(arch).items() if k not in ("name", "notes")},
        "params": {**params, "source": "counted (firmware_gen/host/plan.py count_params)"},
        "published_total_b": published,
        "ffn": {"dense_layers": arch.dense_layers, "moe_layers": arch.moe_layers, "mtp_layers": arch.mtp_layers,
                "routed_experts_per_layer": arch.experts, "shared_experts_per_layer": arch.shared_experts,
                "experts_per_token": arch.top_k, "expert_params": expert_params(arch, arch.expert_intermediate)
                if arch.moe else 0, "dense_layer_params": 3 * arch.hidden * arch.dense_intermediate,
                "routers_placed": False},
        "bytes": {"per_weight": bpw, "ffn": params["ffn"] * bpw, "placed": pl["placed_bytes"],
                  "expert": e_bytes, "source": "counted: parameters x bytes per weight"},
        "placement": {k: v for k, v in pl.items() if k not in ("hops_dense", "hops_moe")},
        "time": {
            "per_token_us": (compute_s + hops_s) * 1e6, "compute_us": compute_s * 1e6, "hops_us": hops_s * 1e6,
            "source": time_source, "clock_mhz": clock_mhz,
            "layer_cycles": {"dense": dense_c, "moe": moe_c}, "units": units,
            "hops": {"rule": HOP_RULE, "per_token": 2 * hops_main, "per_hop_ns": hop_s * 1e9, **hop_info},
            "mtp_extra_us": mtp_s * 1e6,
            "lp30_sram_bw_bound_us": bw_s * 1e6,
            "lp30_sram_bw_bound_source": "analytic: each layer's weights on its busiest chip read once at LP30's "
                                         "public 150 TB/s per chip, hops not counted",
            "lp30_fp8_compute_bound_us": flop_s * 1e6,
            "lp30_fp8_compute_bound_source": "analytic: 2 operations per weight of each layer's busiest chip at "
                                             "LP30's public 1.2 PFLOPS FP8, batch 1",
        },
        "notes": list(arch.notes) + ([] if not arch.expert_bias else
                                     ["expert biases are counted; the compiled expert has none (2I + H adds)"]),
    }


# ---- front end ------------------------------------------------------------------------------------
def check_request(dtype: str, config: str, clock_mhz: float | None, hop_ns: float | None) -> float:
    """The tile clock of a plan (``clock_mhz``, else the preset's, :data:`CLOCK_MHZ` for
    any other tile), after checking the weight format, the clock and the hop latency
    (a :class:`PlanError` naming the first that is wrong)."""
    dtype_figures(dtype)
    if clock_mhz is None:
        clock_mhz = float(PRESET_CLOCK_MHZ.get(config, CLOCK_MHZ))
    if not clock_mhz > 0:
        raise PlanError(f"--clock-mhz must be positive, got {clock_mhz:g}")
    if hop_ns is not None and not hop_ns >= 0:
        raise PlanError(f"--hop-ns must be zero or positive, got {hop_ns:g}")
    return clock_mhz


def plan_models(todo: list[tuple], dtype: str, config: str, clock_mhz: float, hop_ns: float | None = None,
                golden: bool = True, progress=None) -> list[dict]:
    """:func:`plan` of each model of ``todo`` (``model_arch.requested``) on the tile ``config``
    (a preset or a file), its experts compiled once per shape (and run on the golden model
    with ``golden``; ``progress(message)`` told of each); every plan's ``run_seconds``,
    the time of them all."""
    cfg = TileConfig.load(config)
    timer = Timer(cfg, golden=golden, progress=progress)
    t0 = time.time()
    plans = [plan(a, dtype, cfg, config, timer, clock_mhz, hop_ns, title, src, pub) for a, title, src, pub in todo]
    elapsed = time.time() - t0
    for p in plans:
        p["run_seconds"] = round(elapsed, 2)
    return plans
