"""Programs: per-slice instruction queues plus MEM images, with assembler and disassembler.

A :class:`Program` is data: it serialises to JSON, assembles to one binary image (a list
of 64-bit words) per slice queue, and is rebuilt from binary images with every word
checked (an unknown opcode is an error, not a silent HALT).
"""

from __future__ import annotations

import json

import numpy as np

from .config import TileConfig
from .isa import DATA_OPS, SLICE_OPS, Instr, IsaError, Op


class ProgramError(ValueError):
    """A program does not fit the tile or is not legal on it; the message names the limit."""


class Program:
    """Instruction queues (one per slice, by slice name) and initial MEM contents.

    ``queues[name]`` lists the instructions without the final HALT; the assembler adds it.
    ``memory[name]`` is a ``(mem_depth, lanes)`` uint8 array for each MEM slice.
    """

    def __init__(self, config: TileConfig, queues=None, memory=None):
        self.config = config
        self.queues: dict[str, list[Instr]] = {n: [] for n in config.slice_names}
        for name, instrs in (queues or {}).items():
            config.position(name)
            self.queues[name] = list(instrs)
        self.memory: dict[str, np.ndarray] = {
            n: np.zeros((config.mem_depth, config.lanes), np.uint8) for n in config.mem_names}
        for name, img in (memory or {}).items():
            self.set_memory(name, img)

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
                where = f"{name}[{i}] '{ins}'"
                if ins.op not in SLICE_OPS[kind]:
                    raise ProgramError(f"{where}: {ins.op.name} is not an instruction of a {kind} slice")
                if ins.op == Op.HALT:
                    raise ProgramError(f"{where}: HALT inside a program (the assembler appends it)")
                if ins.op in DATA_OPS:
                    if ins.stream >= cfg.streams:
                        raise ProgramError(f"{where}: stream {ins.stream} does not exist; "
                                           f"the tile has {cfg.streams} per direction")
                    if ins.addr >= cfg.mem_depth:
                        raise ProgramError(f"{where}: address {ins.addr} is beyond {name}'s depth "
                                           f"of {cfg.mem_depth} vectors")
                    last = ins
                elif ins.op == Op.REPEAT:
                    if last is None:
                        raise ProgramError(f"{where}: REPEAT with no earlier data instruction to repeat")
                    end = last.addr + ins.count * ins.addr
                    if not 0 <= end < cfg.mem_depth:
                        raise ProgramError(f"{where}: the last repetition addresses {end}, outside "
                                           f"{name}'s 0..{cfg.mem_depth - 1}")
                    last = Instr(last.op, last.stream, last.dir, end)
        return self

    # ---- binary images -----------------------------------------------------------
    def images(self) -> dict[str, list[int]]:
        """Assemble: one list of 64-bit words per slice, HALT-terminated."""
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
        return json.dumps({
            "config": self.config.to_dict(),
            "images": self.images(),
            "memory": {n: m.tolist() for n, m in self.memory.items() if m.any()},
        })

    @classmethod
    def from_json(cls, text: str) -> "Program":
        d = json.loads(text)
        cfg = TileConfig.from_dict(d["config"])
        return cls.from_images(cfg, d["images"], {n: np.array(m, np.uint8) for n, m in d["memory"].items()})
