"""Programs: per-slice instruction queues plus MEM images, with assembler and disassembler.

A :class:`Program` is data: it serialises to JSON, assembles to one binary image (a list
of 64-bit words) per slice queue, and is rebuilt from binary images with every word
checked (an unknown opcode is an error, not a silent HALT).
"""

from __future__ import annotations

import json

import numpy as np

from lpu_arch.config import TileConfig
from lpu_arch.isa import BASE_OPS, DATA_OPS, OPTIONAL_OPS, SLICE_OPS, Instr, IsaError, MMFlag, Op, slice_ops
from lpu_arch.vxm import IDENTITY, PARAM_FIELDS, TABLE_SIZE, VXM_FIELDS, identity_tables, table_bytes
from lpu_arch.errors import LpuError


class ProgramError(LpuError, ValueError):
    """A program does not fit the tile or is not legal on it; the message names the limit."""


class Program:
    """Instruction queues (one per queue of ``config.queue_names``: a slice's own, by its
    name, and the MXMs' loaders ``MXL_W``/``MXL_E``) and initial MEM contents.

    ``queues[name]`` lists the instructions without the final HALT; the assembler adds it.
    ``memory[name]`` is a ``(mem_depth, lanes)`` uint8 array for each MEM slice.
    ``vxm_params`` is a ``(vxm_param_depth, lanes, 9)`` int64 array: per entry and lane the
    fields ``lpu_arch.vxm.VXM_FIELDS`` (bias_a, bias_b, m_a, s_a, m_b, s_b, m_c, s_c, table);
    unused entries are the identity (bias 0, multiplier 1, shift 0, table 0).
    ``table`` is the VXM's activation tables, ``(vxm_tables, 256)`` int8 (identity unless
    set; ``set_table`` also takes one table of 256, table 0).
    ``defined[name]`` is the set of rows of MEM slice ``name`` declared defined before the
    run besides its image (:meth:`declare_defined`, :meth:`defined_rows`).
    """

    def __init__(self, config: TileConfig, queues=None, memory=None, vxm_params=None, table=None, defined=None):
        self.config = config
        self.queues: dict[str, list[Instr]] = {n: [] for n in config.queue_names}
        for name, instrs in (queues or {}).items():
            config.position(name)
            self.queues[name] = list(instrs)
        self.memory: dict[str, np.ndarray] = {
            n: np.zeros((config.mem_depth, config.lanes), np.uint8) for n in config.mem_names}
        for name, img in (memory or {}).items():
            self.set_memory(name, img)
        self.vxm_params = np.tile(np.array(IDENTITY, np.int64), (config.vxm_param_depth, config.lanes, 1))
        if vxm_params is not None:
            self.set_vxm_params(vxm_params)
        self.table = identity_tables(config)
        if table is not None:
            self.set_table(table)
        self.defined: dict[str, set[int]] = {n: set() for n in config.mem_names}
        for name, rows in (defined or {}).items():
            self.declare_defined(name, rows)

    def declare_defined(self, name: str, rows) -> None:
        """Declare rows of MEM slice ``name`` defined before the run though its image does not
        hold them: rows the host writes before it (a resident layer's x), rows an earlier run
        wrote and the tile keeps, blocks zero-filled on purpose."""
        if name not in self.config.mem_names:
            raise ProgramError(f"{name!r} is not a MEM slice; MEM slices are {', '.join(self.config.mem_names)}")
        rows = {int(r) for r in rows}
        bad = [r for r in rows if not 0 <= r < self.config.mem_depth]
        if bad:
            raise ProgramError(f"row {min(bad)} of {name} does not exist; it has mem_depth = {self.config.mem_depth}")
        self.defined[name] |= rows

    def defined_rows(self, name: str) -> np.ndarray:
        """``(mem_depth,)`` bool: the rows of MEM slice ``name`` defined before the run.  A
        slice with an image (a nonzero row: what :meth:`to_json` and a loader carry) has every
        row defined, its zero rows as zero; a slice without one has only the rows
        :attr:`defined` names (SRAM powers up random)."""
        if self.memory[name].any():
            return np.ones(self.config.mem_depth, bool)
        out = np.zeros(self.config.mem_depth, bool)
        out[sorted(self.defined.get(name, ()))] = True
        return out

    def set_vxm_params(self, params) -> None:
        cfg = self.config
        p = np.asarray(params, dtype=np.int64)
        want = (cfg.vxm_param_depth, cfg.lanes, len(VXM_FIELDS))
        if p.ndim != 3 or p.shape[0] > want[0] or p.shape[1:] != want[1:]:
            raise ProgramError(f"VXM parameters have shape {p.shape}; they must be (entries <= {want[0]}, "
                               f"{want[1]} lanes, {want[2]} fields {', '.join(VXM_FIELDS)})")
        for i, (f, (*_, lo, hi, _reset)) in enumerate(PARAM_FIELDS.items()):
            v = p[:, :, i]
            if f == "table":
                hi = cfg.vxm_tables - 1
            if v.size and (v.min() < lo or v.max() > hi):
                bad = np.argwhere((v < lo) | (v > hi))[0]
                raise ProgramError(f"VXM parameter {f} of entry {bad[0]}, lane {bad[1]} is "
                                   f"{int(v[tuple(bad)])}; it must be in {lo}..{hi}")
        self.vxm_params[: p.shape[0]] = p

    def set_table(self, table) -> None:
        """One table of 256 bytes (table 0; the others stay as they are) or ``(k, 256)``,
        tables 0..k-1 (``k <= vxm_tables``).  Entries are int8 values or, for an FP8 tile's
        E4M3 codes, unsigned bytes; either is stored as its byte."""
        t = np.asarray(table)
        k = self.config.vxm_tables
        if t.shape == (TABLE_SIZE,):
            t = t[None]
        if t.ndim != 2 or t.shape[1] != TABLE_SIZE or not 1 <= t.shape[0] <= k:
            raise ProgramError(f"the activation tables have shape {t.shape}; they must be ({TABLE_SIZE},) or "
                               f"(tables <= {k}, {TABLE_SIZE}): the tile has {k} table(s) of {TABLE_SIZE} entries")
        if t.min() < -128 or t.max() > 255:
            raise ProgramError("activation table entries must be bytes: int8 values in -128..127 or codes in 0..255")
        self.table = self.table.copy()
        self.table[: t.shape[0]] = table_bytes(t)

    def set_memory(self, name: str, img) -> None:
        cfg = self.config
        if name not in cfg.mem_names:
            raise ProgramError(f"{name!r} is not a MEM slice; MEM slices are {', '.join(cfg.mem_names)}")
        img = np.asarray(img)
        if img.ndim != 2 or img.shape[1] != cfg.lanes or img.shape[0] > cfg.mem_depth:
            raise ProgramError(f"memory image for {name} has shape {img.shape}; it must be "
                               f"(rows <= {cfg.mem_depth}, {cfg.lanes})")
        full = np.zeros((cfg.mem_depth, cfg.lanes), np.uint8)
        full[: img.shape[0]] = img.astype(np.int64) & 0xFF
        self.memory[name] = full

    # ---- checking ----------------------------------------------------------------
    def validate(self) -> "Program":
        """Check every queue against the tile: legal opcodes per slice kind, stream and
        address ranges (including every REPEAT repetition), queue capacity."""
        cfg = self.config
        for name, instrs in self.queues.items():
            kind = cfg.kind(name)
            if len(instrs) + 1 > cfg.iq_depth:
                raise ProgramError(f"program for {name} needs {len(instrs) + 1} instructions "
                                   f"(with HALT); its queue holds {cfg.iq_depth}")
            last = None
            for i, ins in enumerate(instrs):
                where = _Where(name, i, ins)
                if ins.op not in slice_ops(kind, cfg):
                    if OPTIONAL_OPS.get(ins.op, ("",))[0] == kind:
                        field = OPTIONAL_OPS[ins.op][1]
                        raise ProgramError(f"{where}: {ins.op.name} needs {field} = 1; this tile is built "
                                           f"without it ({field} = 0)")
                    hint = ""
                    if ins.op in SLICE_OPS["MXL"] and kind == "MXM":
                        hint = f" (LW and LX issue from the MXM's loader queue MXL_{name[-1]})"
                    elif ins.op in SLICE_OPS["MXM"] and kind == "MXL":
                        hint = f" (MM issues from the MXM's own queue MXM_{name[-1]})"
                    what = "an MXM loader queue" if kind == "MXL" else f"a {kind} slice"
                    raise ProgramError(f"{where}: {ins.op.name} is not an instruction of {what}{hint}")
                if ins.op == Op.HALT:
                    raise ProgramError(f"{where}: HALT inside a program (the assembler appends it)")
                if ins.op in DATA_OPS:
                    self._check_data(ins, name, where)
                    last = ins
                elif ins.op == Op.REPEAT:
                    if last is None:
                        raise ProgramError(f"{where}: REPEAT with no earlier data instruction to repeat")
                    # A READ's or WRITE's only operand that moves is its whole address, which
                    # moves by the stride: its first and last repetitions bound all of them
                    # (when one of them fails, every repetition is checked to name the first).
                    every = range(1, ins.count + 1)
                    ends = (1, ins.count) if last.op in (Op.READ, Op.WRITE) and ins.count > 2 else every
                    try:
                        self._check_repeat(last, ins, name, i, ends)
                    except ProgramError:
                        self._check_repeat(last, ins, name, i, every)
                    last = last.with_addr(last.addr + ins.count * ins.addr)
        return self

    def _check_repeat(self, last: Instr, rep_ins: Instr, name: str, i: int, ks) -> None:
        """Repetitions ``ks`` of ``REPEAT`` ``rep_ins`` (queue ``name``, index ``i``) of ``last``."""
        where = _Where(name, i, rep_ins)
        for k in ks:
            rep = last.with_addr(last.addr + k * rep_ins.addr)
            if not 0 <= rep.addr < 1 << 20:
                raise ProgramError(f"{where}: repetition {k} has address field {rep.addr}, outside 0..1048575")
            self._check_data(rep, name, _Where(name, i, rep_ins, (k, last)))

    def _check_data(self, ins: Instr, name: str, where: str) -> None:
        """Operand ranges of one data instruction against the tile."""
        cfg = self.config

        def need(cond, msg):
            if not cond:
                raise ProgramError(f"{where}: {msg}")

        need(ins.stream < cfg.streams, f"stream {ins.stream} does not exist; the tile has {cfg.streams} per direction")
        if ins.op in BASE_OPS:
            need(ins.base < cfg.base_regs,
                 f"base register {ins.base} does not exist; the tile has {cfg.base_regs} (0..{cfg.base_regs - 1})")
        if ins.op in (Op.READ, Op.WRITE):
            need(ins.addr < cfg.mem_depth, f"address {ins.addr} is beyond {name}'s depth of {cfg.mem_depth} vectors")
        elif ins.op == Op.LW:
            n = ins.operand("n")
            need(n <= cfg.lanes, f"LW loads n = {n} rows per cycle; a block has {cfg.lanes} rows")
            rows = ins.operand("rows")
            need(rows == 0 or cfg.mxm_partial_lw, f"LW loads rows = {rows} rows; this tile's MXM loads whole "
                                                  f"blocks only (mxm_partial_lw = 0: rows must be 0)")
            need(rows <= cfg.lanes, f"LW loads rows = {rows} rows; a block has {cfg.lanes} (0: all of them)")
            need(ins.stream + n <= cfg.streams, f"LW reads streams {ins.stream}..{ins.stream + n - 1}; "
                                                f"the tile has {cfg.streams} per direction")
        elif ins.op == Op.MM:
            need(ins.operand("acc") < cfg.mxm_acc_depth,
                 f"accumulator row {ins.operand('acc')} is beyond the MXM's {cfg.mxm_acc_depth}")
            need(not ins.aux & MMFlag.XBUF or ins.operand("slot") < cfg.mxm_xbuf_depth,
                 f"x slot {ins.operand('slot')} is beyond the MXM's {cfg.mxm_xbuf_depth}")
            need(not ins.aux & MMFlag.EMIT or ins.operand("out") + cfg.acc_planes <= cfg.streams,
                 f"EMIT drives streams {ins.operand('out')}..{ins.operand('out') + cfg.acc_planes - 1}; "
                 f"the tile has {cfg.streams} per direction")
        elif ins.op == Op.LX:
            need(ins.operand("slot") < cfg.mxm_xbuf_depth,
                 f"x slot {ins.operand('slot')} is beyond the MXM's {cfg.mxm_xbuf_depth}")
        elif ins.op == Op.VOP:
            need(ins.operand("param") < cfg.vxm_param_depth,
                 f"parameter entry {ins.operand('param')} is beyond the VXM's {cfg.vxm_param_depth}")
            need(ins.stream + cfg.acc_planes <= cfg.streams,
                 f"VOP reads accumulator planes on streams {ins.stream}..{ins.stream + cfg.acc_planes - 1}; "
                 f"the tile has {cfg.streams} per direction")
            need(ins.operand("out") < cfg.streams, f"output stream {ins.operand('out')} does not exist")
        elif ins.op in (Op.SEND, Op.RECV, Op.SENDM):
            if ins.op == Op.SENDM:
                need(ins.operand("links") != 0, "SENDM names no link (links mask 0)")
            for link in ins.links():
                need(link < cfg.links, f"link {link} does not exist; the tile has {cfg.links} link(s)")
                need(cfg.link_slice(link) == name, f"link {link} is served by {cfg.link_slice(link)}, not {name} "
                                                   "(C2C_W serves the even links, C2C_E the odd ones)")
        elif ins.op == Op.SETB:
            need(ins.operand("reg") != 0, "SETB writes base register 0, the constant 0: it would have no effect")
            need(ins.operand("reg") < cfg.base_regs,
                 f"SETB writes base register {ins.operand('reg')}; the tile has {cfg.base_regs} (1..{cfg.base_regs - 1})")
        elif ins.op in (Op.SHIFT, Op.PERM, Op.DIST, Op.TRI, Op.TRO, Op.MAX, Op.ARGMAX):
            L = cfg.lanes
            if ins.op != Op.TRI:
                need(ins.operand("out") < cfg.streams, f"output stream {ins.operand('out')} does not exist")
            if ins.op == Op.SHIFT:
                need(ins.operand("k") < L, f"SHIFT by {ins.operand('k')} lanes; it must be below the {L} lanes")
            elif ins.op == Op.PERM:
                need(ins.operand("map") < cfg.streams, f"map stream {ins.operand('map')} does not exist")
            elif ins.op == Op.MAX:
                need(ins.operand("k") < L, f"MAX rotates by {ins.operand('k')} lanes; it must be below the {L} lanes")
                need(ins.operand("with") < cfg.streams, f"with stream {ins.operand('with')} does not exist")
            elif ins.op == Op.ARGMAX:
                need(ins.stream + cfg.acc_planes <= cfg.streams,
                     f"ARGMAX reads accumulator planes on streams {ins.stream}..{ins.stream + cfg.acc_planes - 1}; "
                     f"the tile has {cfg.streams} per direction")
            elif ins.op == Op.DIST:
                k, g = ins.operand("k"), ins.operand("g")
                need(g >= 1 and g & (g - 1) == 0 and L % g == 0,
                     f"DIST group g = {g} must be a power of two dividing the {L} lanes")
                need(k + g <= L, f"DIST takes lanes {k}..{k + g - 1}; the vector has {L}")
            elif ins.op == Op.TRI:
                need(ins.operand("row") < L, f"TRI row {ins.operand('row')} is beyond the {L} rows")
            else:
                need(ins.operand("col") < L, f"TRO column {ins.operand('col')} is beyond the {L} columns")

    # ---- binary images -----------------------------------------------------------
    def images(self) -> dict[str, list[int]]:
        """Assemble: one list of 64-bit words per queue, HALT-terminated."""
        self.validate()
        return {n: [i.encode() for i in q] + [Instr.halt().encode()] for n, q in self.queues.items()}

    @classmethod
    def from_images(cls, config: TileConfig, images: dict, memory=None) -> "Program":
        """Disassemble binary images (each stops at its first HALT) into a checked Program."""
        queues = {}
        for name, words in images.items():
            config.position(name)
            if len(words) > config.iq_depth:
                raise ProgramError(f"image for {name} has {len(words)} words; the queue holds {config.iq_depth}")
            q = []
            for i, w in enumerate(words):
                ins = Instr.decode(int(w), where=f"{name} word {i}")
                if ins.op == Op.HALT:
                    break
                q.append(ins)
            else:
                raise ProgramError(f"image for {name} has no HALT")
            queues[name] = q
        return cls(config, queues, memory).validate()

    # ---- text --------------------------------------------------------------------
    def disassemble(self) -> str:
        out = []
        for name, q in self.queues.items():
            if q:
                out.append(f"[{name}]")
                out += [f"    {i}" for i in q]
        return "\n".join(out) + "\n"

    @classmethod
    def assemble(cls, config: TileConfig, text: str) -> "Program":
        """Parse assembly text: ``[SLICE]`` headers, one instruction per line, ``#`` comments."""
        queues, cur = {}, None
        for ln, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("["):
                if not line.endswith("]"):
                    raise IsaError(f"line {ln}: malformed section header {line!r}")
                cur = line[1:-1].strip()
                config.position(cur)
                queues.setdefault(cur, [])
                continue
            if cur is None:
                raise IsaError(f"line {ln}: instruction before any [SLICE] header")
            try:
                queues[cur].append(Instr.parse(line))
            except IsaError as e:
                raise IsaError(f"line {ln}: {e}") from None
        return cls(config, queues).validate()

    # ---- serialisation -------------------------------------------------------------
    def to_json(self) -> str:
        """The whole program with its tile's full configuration, as JSON (``FORMAT``); the
        optional key ``"defined"`` holds the declared rows of slices without an image (only
        when there are some: :meth:`defined_rows` needs no others)."""
        return json.dumps({
            "format": FORMAT,
            "config": self.config.to_dict(),
            "images": self.images(),
            "memory": {n: m[:_used_rows(m)].tolist() for n, m in self.memory.items() if m.any()},
            "vxm_params": self.vxm_params.tolist(),
            "table": self.table.tolist(),
            **({"defined": self._declared()} if self._declared() else {}),
        })

    def _declared(self) -> dict:
        """The declared rows :meth:`defined_rows` needs besides the images: those of slices
        without an image (JSON's optional ``"defined"``)."""
        return {n: sorted(rows) for n, rows in self.defined.items() if rows and not self.memory[n].any()}

    @classmethod
    def from_json(cls, text: str) -> "Program":
        """Read :meth:`to_json`'s text; anything missing, unknown, of another format or out
        of range is a ProgramError (or ConfigError, IsaError) naming it."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProgramError(f"not JSON: {e}") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            got = d.get("format") if isinstance(d, dict) else None
            raise ProgramError(f"not a program of format {FORMAT!r} (format {got!r}); recompile it")
        keys = {"format", "config", "images", "memory", "vxm_params", "table"}
        unknown, missing = set(d) - keys - {"defined"}, keys - set(d)          # (the format is there: checked above)
        if unknown or missing:
            raise ProgramError(f"program JSON has {'unknown' if unknown else 'no'} key(s) "
                               f"{', '.join(sorted(unknown or missing))}")
        cfg = TileConfig.from_dict(d["config"], complete=True)
        if not isinstance(d["images"], dict) or not isinstance(d["memory"], dict):
            raise ProgramError("program JSON: images and memory must be objects keyed by slice name")
        memory = {n: _byte_rows(m, n, cfg) for n, m in d["memory"].items()}
        images = {n: _words(w, n) for n, w in d["images"].items()}
        queues = cls.from_images(cfg, images).queues
        defined = d.get("defined", {})
        if not isinstance(defined, dict) or not all(
                isinstance(r, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
                for r in defined.values()):
            raise ProgramError("program JSON: defined must be an object of MEM slice -> list of row numbers")
        try:
            return cls(cfg, queues, memory, d["vxm_params"], d["table"], defined).validate()
        except (ProgramError, IsaError):
            raise
        except (ValueError, TypeError) as e:
            raise ProgramError(f"program JSON: the VXM parameters or the table are malformed ({e})") from None


FORMAT = "lpu-program/3"    # Program.to_json: changes with the JSON layout or the ISA's encoding


class _Where:
    """Where an instruction sits, for error messages: made into text only when one is raised
    (validating a large program builds millions of them)."""
    __slots__ = ("name", "i", "ins", "rep")

    def __init__(self, name, i, ins, rep=None):
        self.name, self.i, self.ins, self.rep = name, i, ins, rep

    def __str__(self):
        text = f"{self.name}[{self.i}] '{self.ins}'"
        return text if self.rep is None else f"{text} (repetition {self.rep[0]} of {self.rep[1]})"


def _used_rows(img) -> int:
    """Rows of a MEM image up to its last non-zero one (the rest load as zeros)."""
    return int(np.flatnonzero(img.any(axis=1))[-1]) + 1


def memory_images(text: str, cfg: TileConfig) -> dict:
    """MEM images from JSON text: ``{slice: rows of lanes bytes}`` (``to_json``'s
    ``"memory"``), each checked (ProgramError naming the slice and row)."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProgramError(f"memory images: not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ProgramError("memory images must be a JSON object keyed by MEM slice name")
    for n in d:
        if n not in cfg.mem_names:
            raise ProgramError(f"memory images: {n!r} is not a MEM slice; MEM slices are {', '.join(cfg.mem_names)}")
    return {n: _byte_rows(m, n, cfg) for n, m in d.items()}


def _byte_rows(rows, name, cfg):
    """A MEM image from JSON: rows of ``lanes`` bytes 0..255 (ProgramError naming the row)."""
    if not isinstance(rows, list) or len(rows) > cfg.mem_depth:
        raise ProgramError(f"memory of {name} must be a list of at most {cfg.mem_depth} rows")
    for r, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != cfg.lanes:
            raise ProgramError(f"memory of {name} row {r} is not a list of {cfg.lanes} bytes")
        bad = [v for v in row if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 255]
        if bad:
            raise ProgramError(f"memory of {name} row {r} holds {bad[0]!r}; a byte is 0..255")
    return np.array(rows, np.uint8).reshape(-1, cfg.lanes)


def _words(words, name):
    if not isinstance(words, list) or not all(isinstance(w, int) and not isinstance(w, bool) for w in words):
        raise ProgramError(f"image of {name} must be a list of 64-bit instruction words")
    return words
