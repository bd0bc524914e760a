"""The tile configuration: the single source of truth for every size and width.

The HDL (``hdl/``), the compiler and the golden model (``firmware_gen/``), the
testbenches (``sim/``) and the reports all read their sizes from one
:class:`TileConfig`.  Nothing else in the project restates a width by hand.

Slice order (design brief, section 1): positions run west to east.  In the ``edge``
layout (``TileConfig.mxm_layout``, TSP v1's floorplan and the default) the MXMs are at the
ends ::

    MXM_W | SXM_W | MEM_W{n-1} .. MEM_W0 | VXM | MEM_E0 .. MEM_E{n-1} | SXM_E | MXM_E

and in the ``center`` layout beside the VXM, so that an MXM's results reach the VXM on the
next position instead of across a hemisphere (``docs/architecture.md``, "Layouts") ::

    SXM_W | MEM_W{n-1} .. MEM_W0 | MXM_W | VXM | MXM_E | MEM_E0 .. MEM_E{n-1} | SXM_E

``MEM_W0`` and ``MEM_E0`` are the MEM slices nearest the VXM.  Every position has an
instruction queue named after its slice; each MXM has a second one, its *loader*
(``MXL_W``, ``MXL_E``: ``LW`` and ``LX``), at the MXM's position, so that loading weights
and x never takes an ``MM`` issue slot.  Queues are numbered by position, the loaders
after the last position (:attr:`TileConfig.queue_names`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lpu_arch import fp8, isa
from lpu_arch.errors import LpuError

DTYPES = ("int8", "fp8")      # the MXM's number formats (TileConfig.mxm_dtype)
LAYOUTS = ("edge", "center")  # where the MXMs sit (TileConfig.mxm_layout)


# The clock each preset is reported at: TSP v1's 900 MHz, except ``lp30``, whose clock is
# the one at which its SRAM delivers LP30's public 150 TB/s: 150e12 B/s / (2 x 107 slices
# x 320 B) = 2.19 GHz (LP30's clock is not public; docs/lp30.md).
PRESET_CLOCK_MHZ = {"default": 900, "tiny": 900, "board": 25, "full_scale": 900, "lp30": 2190}


# The decoder tile, as --set overrides of a preset: the optional SXM opcodes a decoder on chip uses,
# MAX (attention's maximum score), ARGMAX (the LM head's next token) and SETB (the embedding row
# read at its id), and queues, event traces and VXM parameter entries enough for 16 tokens of the
# token loop's 2-layer model with attention and RMSNorms unrolled after a 2-token prompt (4,044
# instructions in its deepest queue, 86 parameter entries; each queue's words are zero-initialised
# in the generated Verilog, so a deeper queue costs every build).  The attention step and the token
# loop run on the default tile with them: one build.
DECODER_FIELDS = ("sxm_max=1", "sxm_argmax=1", "sxm_setb=1", "iq_depth=4096", "trace_depth=512", "vxm_param_depth=128")


class ConfigError(LpuError, ValueError):
    """A configuration value is out of range; the message names the field and the limit."""


def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


@dataclass(frozen=True)
class TileConfig:
    """Sizes of one tile.

    Parameters
    ----------
    lanes : int
        Vector width in bytes (one int8 per lane).  A multiple of 4, so that a vector
        is a whole number of 32-bit host words.
    streams : int
        Stream registers per direction (east and west each have this many).
    mem_slices : int
        MEM slices per hemisphere (the tile has twice this many).
    mem_depth : int
        Vectors per MEM slice (a power of two).
    iq_depth : int
        Instructions per slice instruction queue (a power of two).
    trace_depth : int
        Events recorded per MEM slice by the hardware event trace (0 disables the
        trace, for synthesis).
    mxm_acc_depth : int
        int32 accumulator rows (vectors of ``lanes`` int32) per MXM.
    mxm_xbuf_depth : int
        x slots (int8 vectors) per MXM, the operands MM reads with its XBUF flag.
    vxm_param_depth : int
        Entries of the VXM parameter memory (per-lane bias, requantisation multiplier
        and shift for one VOP).
    vxm_tables : int
        Activation tables of the VXM (256 int8 each); a parameter entry names one per lane.
    base_regs : int
        Base registers of the tile (register 0 is the constant 0; ``docs/isa.md``): the
        host loads them per run, and READ, WRITE and VOP add one's offset to their
        address or parameter entry, or skip when it is off.
    links : int
        Chip-to-chip links of the tile (0: a single tile without C2C slices).  With
        links, ``C2C_W`` (even links) and ``C2C_E`` (odd links) sit between the SXMs
        and the MEM slices.
    link_width : int
        Data bits per flit (one flit per link per cycle); a vector is
        ``vector_bits / link_width`` flits.
    link_latency_min, link_latency_max : int
        Declared range of a link's wire latency, in the sender's cycles.
    max_ppm : int
        Specified clock tolerance: every tile's frequency is within this many ppm of the
        root tile's.
    epoch : int
        HAC epoch in cycles (a power of two): DESKEW waits for an epoch boundary.
    sync_interval : int
        Cycles between a parent's HAC updates to its children.
    rx_depth : int
        Vectors the receive buffer of each link holds.
    mxm_dtype : str
        The MXM's number format, one per build (``DTYPES``): ``"int8"`` (int8 weights and x,
        int32 accumulators in 4 byte planes) or ``"fp8"`` (OCP E4M3 codes, exact fixed-point
        accumulators of :attr:`acc_bits` in :attr:`acc_planes` byte planes, and a VXM that
        rounds its results to E4M3; ``docs/numerics.md``, "FP8").
    fp8_max_terms : int
        The longest accumulation (products summed into one accumulator, across an ``MM ACC``
        chain) an FP8 tile holds exactly: it sets :attr:`acc_bits`
        (``lpu_arch.fp8.acc_bits``).  The compiler refuses longer dot products.  Unused in
        int8 mode.
    mxm_layout : str
        Where the two MXMs sit (``LAYOUTS``, the module docstring's layouts): ``"edge"`` or
        ``"center"``, beside the VXM, for single tiles (``links`` = 0: the tray compilers
        place for the edge layout).
    vxm_latency : int
        Cycles from a ``VOP``'s issue to its result at the VXM (``isa.VXM_LATENCIES``): 3, or
        4 with a fifth stage for the FPGA's clock (the ``tiny`` and ``board`` presets;
        ``docs/fpga.md``).
    mxm_partial_lw : int
        1: an MXM's ``LW`` may load only a block's first ``rows`` rows (the FFN compiler's
        last, partly padded block); 0: every ``LW`` loads the whole block and ``rows`` is
        refused (the ``tiny`` and ``board`` presets, whose place-and-route is tight).
    sxm_max : int
        1: the SXMs execute ``MAX`` (the lane-wise signed maximum of a vector and a rotation
        of another, ``docs/isa.md``); 0, every preset: ``MAX`` is an illegal opcode there.
        An optional field (:attr:`OPTIONAL_FIELDS`): listed only where it is 1.
    sxm_argmax : int
        1: the SXMs execute ``ARGMAX`` (the running argmax of accumulator vectors, e.g. an LM
        head's logits, and the index it keeps; ``docs/isa.md``); 0, every preset: illegal there.
        An optional field.
    sxm_setb : int
        1: the SXMs execute ``SETB`` (a base register set from a stream vector while the tile
        runs, e.g. the next token's embedding row from ``ARGMAX``'s index); 0, every preset:
        illegal there, and the base registers change only by the host.  An optional field.
    """

    lanes: int = 16
    streams: int = 8
    mem_slices: int = 4
    mem_depth: int = 2048
    iq_depth: int = 2048
    trace_depth: int = 256
    mxm_acc_depth: int = 128
    mxm_xbuf_depth: int = 512
    vxm_param_depth: int = 64
    vxm_tables: int = 8
    base_regs: int = 16
    links: int = 0
    link_width: int = 32
    link_latency_min: int = 2
    link_latency_max: int = 16
    max_ppm: int = 1000
    epoch: int = 1024
    sync_interval: int = 64
    rx_depth: int = 8
    mxm_dtype: str = "int8"
    fp8_max_terms: int = 2048
    vxm_latency: int = isa.VXM_LATENCY
    mxm_layout: str = "edge"
    mxm_partial_lw: int = 1
    sxm_max: int = 0
    sxm_argmax: int = 0
    sxm_setb: int = 0

    # Optional fields, the last ones declared: a configuration lists one (``to_dict``, the
    # TOML form, a saved program, the build key, the hardware's configuration block) only
    # where it differs from the value here, so that a tile without the feature it adds keeps
    # the configuration, programs and hardware it had before the field existed.
    OPTIONAL_FIELDS = {"sxm_max": 0, "sxm_argmax": 0, "sxm_setb": 0}

    # Fixed architectural limits (from the ISA's field widths, lpu_arch/isa.py).
    MAX_STREAMS = 1 << isa.FIELD["stream"][1]
    MAX_MEM_SLICES = 120      # positions must fit an 8-bit slice index
    MAX_MEM_DEPTH = 1 << isa.ADDR_BITS
    CYCLE_BITS = 32           # width of the cycle counter and trace timestamps
    HOST_WORD = 32            # host interface data width in bits
    INT32_PLANES = isa.INT32_PLANES
    MAX_ACC_BITS = fp8.ADDER_BITS   # the VXM's requantiser product (acc * 15-bit multiplier) stays below 2^62
    MAX_LINKS = 7             # C2C links per tile (all-to-all tray of 8)
    # Fixed link hardware (docs/c2c.md).
    HAC_BITS = 32             # the hardware- and software-aligned counters
    ELASTIC_DEPTH = 16        # flits in a link's elastic (clock-crossing) buffer
    ECHO_TURNAROUND = 2       # cycles from a PROBE decoded to its ECHO in the parent's transmit register

    def __post_init__(self):
        def need(cond, msg):
            if not cond:
                raise ConfigError(msg)

        def pow2(name, lo, hi, what=""):
            v = getattr(self, name)
            need(_is_pow2(v) and lo <= v <= hi, f"{name} must be a power of two in {lo}..{hi}{what}, got {v}")

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            need(f.name in self.TEXT_FIELDS or (isinstance(v, int) and not isinstance(v, bool)),
                 f"{f.name} must be an integer, got {v!r}")
        need(self.lanes >= 4, f"lanes must be at least 4, got {self.lanes}")
        need(self.lanes % 4 == 0,
             f"lanes must be a multiple of 4 (a vector is a whole number of 32-bit host words), got {self.lanes}")
        need(1 <= self.streams <= self.MAX_STREAMS,
             f"streams per direction must be in 1..{self.MAX_STREAMS}, got {self.streams}")
        need(1 <= self.mem_slices <= self.MAX_MEM_SLICES,
             f"mem_slices per hemisphere must be in 1..{self.MAX_MEM_SLICES}, got {self.mem_slices}")
        pow2("mem_depth", 2, self.MAX_MEM_DEPTH)
        pow2("iq_depth", 2, 1 << 19, " (the host map's two words an instruction within a slice's 2**20)")
        need(self.trace_depth == 0 or (_is_pow2(self.trace_depth) and self.trace_depth <= 1 << 16),
             f"trace_depth must be 0 or a power of two up to 65536, got {self.trace_depth}")
        for name in ("mxm_acc_depth", "mxm_xbuf_depth"):
            pow2(name, 2, 1 << isa.MM_ACC_BITS, " (MM's operand field)")
        pow2("vxm_param_depth", 2, 1 << 13, " (the host map's VXM words at 16 lanes; hostmap.check_fits "
             "states the bound at other widths)")
        pow2("vxm_tables", 1, 256, " (a parameter entry's table field)")
        pow2("base_regs", 2, 1 << isa.BASE_BITS, " (the base operand)")
        need(0 <= self.links <= self.MAX_LINKS, f"links must be in 0..{self.MAX_LINKS}, got {self.links}")
        need(self.link_width >= 8 and self.vector_bits % self.link_width == 0,
             f"link_width must be at least 8 and divide the {self.vector_bits}-bit vector, got {self.link_width}")
        need(1 <= self.link_latency_min <= self.link_latency_max <= 255,
             f"link latency range must satisfy 1 <= min <= max <= 255, got "
             f"{self.link_latency_min}..{self.link_latency_max}")
        need(0 <= self.max_ppm <= 100_000, f"max_ppm must be in 0..100000, got {self.max_ppm}")
        pow2("epoch", 64, 1 << 16, " cycles")
        need(8 <= self.sync_interval <= self.epoch,
             f"sync_interval must be in 8..epoch ({self.epoch}) cycles, got {self.sync_interval}")
        pow2("rx_depth", 2, 256, " vectors")
        need(self.mxm_dtype in DTYPES, f"mxm_dtype must be one of {', '.join(DTYPES)}, got {self.mxm_dtype!r}")
        need(self.mxm_layout in LAYOUTS, f"mxm_layout must be one of {', '.join(LAYOUTS)}, got {self.mxm_layout!r}")
        need(self.mxm_layout == "edge" or self.links == 0,
             f"mxm_layout {self.mxm_layout!r} is for single tiles (links = 0; the tray compilers place for "
             f"the edge layout), got links = {self.links}")
        need(self.fp8_max_terms >= 1 and fp8.acc_bits(self.fp8_max_terms) <= self.MAX_ACC_BITS,
             f"fp8_max_terms must be in 1..{1 << (self.MAX_ACC_BITS - fp8.PRODUCT_BITS)} (an exact sum of that "
             f"many E4M3 products needs {self.MAX_ACC_BITS} bits, the VXM's limit), got {self.fp8_max_terms}")
        need(self.mxm_dtype != "fp8" or self.fp8_max_terms >= self.lanes,
             f"fp8_max_terms must be at least lanes ({self.lanes}: one MM sums that many products), "
             f"got {self.fp8_max_terms}")
        need(self.mxm_partial_lw in (0, 1), f"mxm_partial_lw must be 0 or 1, got {self.mxm_partial_lw}")
        for flag in self.OPTIONAL_FIELDS:
            need(getattr(self, flag) in (0, 1), f"{flag} must be 0 or 1, got {getattr(self, flag)}")
        need(self.vxm_latency in isa.VXM_LATENCIES,
             f"vxm_latency must be one of {', '.join(map(str, isa.VXM_LATENCIES))} cycles, got {self.vxm_latency}")
        need(self.streams >= self.acc_planes,
             f"streams per direction must be at least {self.acc_planes} (an accumulator vector travels "
             f"as {self.acc_planes} byte-plane streams), got {self.streams}")

    # ---- named presets -------------------------------------------------------------
    @classmethod
    def default(cls) -> "TileConfig":
        """The default tile: 16 lanes, 8 streams per direction, 4+4 MEM slices of 32 KiB."""
        return cls()

    @classmethod
    def tiny(cls) -> "TileConfig":
        """A tiny tile for fast tests and the FPGA: 4 lanes, 4 streams, 2+2 MEM slices of 64
        vectors, the VXM's fifth stage (``vxm_latency`` 4, for 40 MHz on the ULX3S) and whole-block
        weight loads only (``mxm_partial_lw`` 0)."""
        return cls(lanes=4, streams=4, mem_slices=2, mem_depth=64, iq_depth=64, trace_depth=64,
                   mxm_acc_depth=16, mxm_xbuf_depth=64, vxm_param_depth=16, vxm_latency=4, mxm_partial_lw=0)

    TRAY_IQ_DEPTH = 512    # the tiny tile's queues as a tray's tile: deep enough for the tray's programs

    @classmethod
    def tiny_tray(cls) -> "TileConfig":
        """The tiny tile as the tile of a tray, the C2C demo and the decode loop: its
        instruction queues ``TRAY_IQ_DEPTH`` deep, enough for their programs (not a preset
        of its own: ``--config tiny`` names it where a tray runs)."""
        return dataclasses.replace(cls.tiny(), iq_depth=cls.TRAY_IQ_DEPTH)

    @classmethod
    def board(cls) -> "TileConfig":
        """The FPGA tile (docs/fpga.md): 8 lanes, 4 streams, 2+2 MEM slices of 1024 vectors,
        the whole single-tile ISA, sized for the ULX3S's LFE5U-85F; reported at its 25 MHz."""
        return cls(lanes=8, streams=4, mem_slices=2, mem_depth=1024, iq_depth=512, trace_depth=64,
                   mxm_acc_depth=32, mxm_xbuf_depth=128, vxm_param_depth=16, vxm_latency=4, mxm_partial_lw=0)

    @classmethod
    def full_scale(cls) -> "TileConfig":
        """TSP-v1-like proportions (320 lanes, 32 streams, 44+44 MEM slices): elaborates, too big to simulate."""
        return cls(lanes=320, streams=32, mem_slices=44, mem_depth=8192, iq_depth=4096, trace_depth=0,
                   mxm_acc_depth=1024, mxm_xbuf_depth=1024, vxm_param_depth=256)

    @classmethod
    def lp30(cls) -> "TileConfig":
        """An LP30-like chip as one tile (docs/lp30.md): 320 lanes, 107+107 MEM slices of 8192
        vectors (561 MB), 108 streams per direction (an MXM loads a 320-row block from every
        slice of its hemisphere in 3 cycles), the center layout.  Too big to simulate."""
        return cls(lanes=320, streams=108, mem_slices=107, mem_depth=8192, iq_depth=8192, trace_depth=0,
                   mxm_acc_depth=1024, mxm_xbuf_depth=1024, vxm_param_depth=512, mxm_layout="center")

    TEXT_FIELDS = {"mxm_dtype": DTYPES, "mxm_layout": LAYOUTS}   # text field -> its choices

    PRESETS = ("default", "tiny", "board", "full_scale", "lp30")

    @classmethod
    def preset(cls, name: str) -> "TileConfig":
        if name not in cls.PRESETS:
            raise ConfigError(f"unknown configuration preset {name!r}; choose one of {', '.join(cls.PRESETS)}")
        return getattr(cls, name)()

    @classmethod
    def load(cls, source: str, sets=()) -> "TileConfig":
        """A preset name, or a ``.toml`` or ``.json`` file of fields (those it leaves out
        are the default tile's); then ``sets``, overrides like ``"mem_depth=16384"``
        (``--set``).  Every problem is a one-line :class:`ConfigError`."""
        if source in cls.PRESETS:
            cfg = cls.preset(source)
        else:
            path = Path(source)
            if not path.is_file():
                raise ConfigError(f"{source} is neither a preset ({', '.join(cls.PRESETS)}) nor a configuration file")
            try:
                text = path.read_text()
                fields = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
            except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
                kind = "TOML" if path.suffix == ".toml" else "JSON (name a TOML file .toml)"
                raise ConfigError(f"{path} is not {kind}: {e}") from None
            cfg = cls.from_dict(fields)
        return cfg.with_overrides(sets) if sets else cfg

    def with_overrides(self, sets) -> "TileConfig":
        """This configuration with ``FIELD=VALUE`` overrides (integers; ``0x`` for hex)."""
        fields = {}
        for item in sets:
            name, sep, value = (t.strip() for t in item.partition("="))
            if not sep or not name:
                raise ConfigError(f"--set takes FIELD=VALUE, e.g. mem_depth=16384; got {item!r}")
            if name in self.TEXT_FIELDS:
                fields[name] = value
                continue
            try:
                fields[name] = int(value, 0)
            except ValueError:
                raise ConfigError(f"--set {name}={value}: the value must be an integer") from None
        return self.from_dict({**self.to_dict(), **fields})

    def to_toml(self, comment: str = "") -> str:
        """Every field :meth:`to_dict` lists, as a TOML file that :meth:`load` reads back."""
        head = "".join(f"# {line}\n" for line in comment.splitlines())
        return head + "".join(f"{k} = {json.dumps(v)}\n" for k, v in self.to_dict().items())

    # ---- derived sizes -------------------------------------------------------------
    @property
    def acc_bits(self) -> int:
        """Bits of an MXM accumulator and of the VXM's A and B inputs: 32 (int8), or the
        exact FP8 sum of ``fp8_max_terms`` products."""
        return 32 if self.mxm_dtype == "int8" else fp8.acc_bits(self.fp8_max_terms)

    @property
    def acc_planes(self) -> int:
        """Byte-plane streams an accumulator vector travels on (plane b on stream s+b)."""
        return fp8.planes(self.acc_bits)

    @property
    def c2c(self) -> int:
        """C2C slices per hemisphere (1 with links, else 0)."""
        return 1 if self.links else 0

    @property
    def positions(self) -> int:
        """Slice positions along the stream fabric."""
        return 2 * (self.mem_slices + self.c2c) + 5

    @property
    def vxm_position(self) -> int:
        return self.position("VXM")

    @functools.cached_property
    def slice_names(self) -> list[str]:
        """Slice names in position order (west to east; the module docstring's layouts)."""
        n = self.mem_slices
        c_w, c_e = (["C2C_W"], ["C2C_E"]) if self.links else ([], [])
        mem_w, mem_e = [f"MEM_W{i}" for i in reversed(range(n))], [f"MEM_E{i}" for i in range(n)]
        if self.mxm_layout == "center":
            return ["SXM_W"] + c_w + mem_w + ["MXM_W", "VXM", "MXM_E"] + mem_e + c_e + ["SXM_E"]
        return ["MXM_W", "SXM_W"] + c_w + mem_w + ["VXM"] + mem_e + c_e + ["SXM_E", "MXM_E"]

    LOADERS = {"MXL_W": "MXM_W", "MXL_E": "MXM_E"}   # loader queue -> the MXM it issues to
    LOADER_OF = {m: q for q, m in LOADERS.items()}   # the MXM -> its loader queue

    @property
    def queue_names(self) -> list[str]:
        """Instruction queues in index order: one per position (named after its slice),
        then the MXM loaders (the host map's IMEM slice index, ILLEGAL and BUSY bits)."""
        return self.slice_names + list(self.LOADERS)

    @property
    def queues(self) -> int:
        return self.positions + len(self.LOADERS)

    def queue_index(self, name: str) -> int:
        """A queue's index (:attr:`queue_names`)."""
        if name in self.LOADERS:
            return self.positions + list(self.LOADERS).index(name)
        return self.position(name)

    def loader(self, mxm: str) -> str:
        """The loader queue of MXM ``mxm`` (``MXM_W`` -> ``MXL_W``)."""
        return self.LOADER_OF[mxm]

    def link_slice(self, link: int) -> str:
        """The C2C slice that serves ``link``: C2C_W the even links, C2C_E the odd ones."""
        if not 0 <= link < self.links:
            raise ConfigError(f"link {link} does not exist; the tile has {self.links} link(s)")
        return "C2C_W" if link % 2 == 0 else "C2C_E"

    @property
    def level_bits(self) -> int:
        """Bits of a link's buffer level on the observation ports (receive or elastic buffer)."""
        return max(self.rx_depth, self.ELASTIC_DEPTH).bit_length()

    @property
    def flits_per_vector(self) -> int:
        return self.vector_bits // self.link_width

    @property
    def mem_names(self) -> list[str]:
        """MEM slice names in position order (west to east); index = MEM index."""
        return [s for s in self.slice_names if s.startswith("MEM")]

    @functools.cached_property
    def _position_of(self) -> dict[str, int]:
        return {n: p for p, n in enumerate(self.slice_names)}

    def position(self, slice_name: str) -> int:
        """The position of a slice, or of the queue named ``slice_name`` (a loader: its MXM's)."""
        try:
            return self._position_of[self.LOADERS.get(slice_name, slice_name)]
        except KeyError:
            raise ConfigError(f"no slice or queue named {slice_name!r} in this tile; queues are "
                              f"{', '.join(self.queue_names)}") from None

    def kind(self, slice_name: str) -> str:
        """'MEM', 'VXM', 'SXM', 'MXM', 'C2C', or 'MXL' (an MXM's loader queue)."""
        self.position(slice_name)
        return slice_name[:3]

    @property
    def vector_bits(self) -> int:
        return 8 * self.lanes

    @property
    def words_per_vector(self) -> int:
        return self.lanes // 4

    @property
    def mem_addr_bits(self) -> int:
        return (self.mem_depth - 1).bit_length()

    @property
    def iq_addr_bits(self) -> int:
        return (self.iq_depth - 1).bit_length()

    @property
    def mem_bytes(self) -> int:
        """SRAM bytes in the whole tile."""
        return 2 * self.mem_slices * self.mem_depth * self.lanes

    # ---- identity ------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The fields in declaration order, an optional one (:attr:`OPTIONAL_FIELDS`) only
        where it differs from its value there."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in self.OPTIONAL_FIELDS or v != self.OPTIONAL_FIELDS[k]}

    @classmethod
    def from_dict(cls, d: dict, complete: bool = False) -> "TileConfig":
        """A configuration from its fields; with ``complete`` every field must be given
        (a saved program states its whole tile) except the optional ones
        (:attr:`OPTIONAL_FIELDS`: absent, they take their value there), else defaults fill
        the missing ones."""
        if not isinstance(d, dict):
            raise ConfigError(f"a configuration is a JSON object of fields, got {type(d).__name__}")
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = set(d) - set(fields)
        if unknown:
            raise ConfigError(f"unknown configuration field(s): {', '.join(sorted(unknown))} "
                              f"(the fields: {', '.join(fields)})")
        missing = [f for f in fields if f not in d and f not in cls.OPTIONAL_FIELDS]
        if complete and missing:
            raise ConfigError(f"configuration field(s) missing: {', '.join(missing)}")
        return cls(**d)

    def key(self) -> str:
        """A short stable name for build directories: one build per configuration."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return f"l{self.lanes}s{self.streams}m{self.mem_slices}-" + hashlib.sha1(blob).hexdigest()[:8]
