"""A compiled FFN on disk: what ``lpu compile`` writes and ``lpu sim`` / ``lpu show`` read.

``program.json`` is ``Program.to_json()`` (configuration, binary images, MEM images, VXM
parameters, table; loading names any missing or bad part).  ``manifest.json`` holds the
configuration (equal to the program's), ``Manifest.summary()``, every predicted output
write (``writes``), where y lands (``outputs``), the integer and float reference outputs
with the output scale (``reference``), and where the weights came from (``source``), so
that a later ``lpu sim`` checks the hardware without recompiling."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_gen.compiler.ffn import compile_ffn
from firmware_gen.compiler.ffn_example import Example, example_ffn
from firmware_gen.compiler.ffn_manifest import BOUNDS, Manifest
from lpu_arch.config import TileConfig
from lpu_arch.errors import LpuError
from firmware_gen.golden.numerics import (FfnSpec, NumericsError, activation_quantiser, dequantise,
                                   error_report, ffn_float, ffn_int)
from firmware_gen.golden.tables import ACTIVATIONS
from firmware_gen.program import Program
from firmware_gen.host.weights import WeightsError, load_ffn
from firmware_gen.compiler.schedule import PredictedWrite

FORMAT = "lpu-compiled/2"
PROGRAM_FILE, MANIFEST_FILE = "program.json", "manifest.json"


class ArtifactError(LpuError, ValueError):
    """A weights file or a compiled program directory is unusable; the message says why."""



def write_program_dir(out: Path, files: dict, replace: bool = False) -> None:
    """Write ``files`` (name: text) as the program directory ``out``, whole or not at all:
    into a new directory beside it, then renamed to ``out``, so that an interrupted run
    leaves the old directory or the new one, never part of one.

    An ``out`` holding exactly these files is left as it is (with anything else in it, e.g.
    a schedule picture).  One holding another program is replaced, everything in it, only
    with ``replace`` (``lpu --force``); a file, or a directory with files but no program,
    never: each an :class:`ArtifactError`."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"output {out} exists and is not a directory")
    present = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if present:
        if all((out / n).is_file() and (out / n).read_text(errors="replace") == t for n, t in files.items()):
            return
        if PROGRAM_FILE not in present:
            raise ArtifactError(f"output {out} is a directory that holds no program ({', '.join(present[:3])}"
                                f"{', ...' if len(present) > 3 else ''}); give a new or empty directory")
        if not replace:
            raise ArtifactError(f"output {out} holds another program; give --force to replace it (and everything "
                                "in it), or a new directory")
    out = Path(os.path.abspath(out))          # "." has a name and a parent
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{secrets.token_hex(4)}"
    old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        if present:                       # rename(2) replaces an empty directory, not a full one
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        if old.exists() and not out.exists():
            os.rename(old, out)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


@dataclass
class CompiledFfn:
    """A compiled FFN with what is needed to check it later."""
    name: str
    program: Program
    manifest: Manifest
    source: dict = field(default_factory=dict)   # kind, activation, seed or weights file, preset
    y_int8: np.ndarray | None = None              # (batch, H): the integer FFN's output (E4M3 codes on FP8)
    y_float: np.ndarray | None = None             # (batch, H): the float FFN's output
    out_scale: float | None = None

    @property
    def config(self) -> TileConfig:
        return self.program.config

    def error_vs_float(self, y_int8) -> dict | None:
        if self.y_float is None or self.out_scale is None:
            return None
        return error_report(y_int8, self.out_scale, self.y_float, self.config.mxm_dtype)

    # ---- writing and reading -----------------------------------------------------
    def manifest_dict(self) -> dict:
        m = self.manifest
        d = {"format": FORMAT, "name": self.name, "config": self.config.to_dict(), "source": self.source,
             **m.summary(),
             "predicted_cycles": m.cycles,
             "writes": [{"cycle": w.cycle, "slice": w.slice, "addr": w.addr, "data": list(w.data),
                         "block": w.transfer} for w in m.writes],
             "outputs": [{"batch": b, "block": j, "slice": s, "addr": a}
                         for (b, j), (s, a) in sorted(m.outputs.items())]}
        if self.y_int8 is not None:
            d["reference"] = {"y_int8": np.asarray(self.y_int8).tolist(),
                              "y_float": None if self.y_float is None else np.asarray(self.y_float).tolist(),
                              "out_scale": self.out_scale}
        return d

    def save(self, out: Path, replace: bool = False) -> dict:
        """Write ``program.json`` and ``manifest.json`` as the directory ``out``
        (:func:`write_program_dir`, ``replace`` as there); returns their paths."""
        out = Path(out)
        write_program_dir(out, {PROGRAM_FILE: self.program.to_json(),
                                MANIFEST_FILE: json.dumps(self.manifest_dict(), indent=1) + "\n"}, replace)
        return {"program": str(out / PROGRAM_FILE), "manifest": str(out / MANIFEST_FILE)}

    @classmethod
    def load(cls, path) -> "CompiledFfn":
        """Read a directory written by :meth:`save` (or the path of its ``program.json``)."""
        path = Path(path)
        d = path.parent if path.name in (PROGRAM_FILE, MANIFEST_FILE) else path
        if not d.is_dir():
            raise ArtifactError(f"{path} is not a compiled program directory (it does not exist); "
                                "make one with `lpu compile --out DIR`")
        prog = load_program(d / PROGRAM_FILE)
        mf = d / MANIFEST_FILE
        if not mf.exists():
            raise ArtifactError(f"{d} has no {MANIFEST_FILE} (the compiler's predictions); "
                                "make the directory with `lpu compile --out DIR`")
        try:
            m = json.loads(mf.read_text())
            if m.get("format") != FORMAT:
                raise ArtifactError(f"{mf} is not an lpu manifest of this version (format {m.get('format')!r}, "
                                    f"expected {FORMAT!r}): recompile it with `lpu compile`")
            made_for, have = m["config"], prog.config.to_dict()
            if made_for != have:
                diff = [f"{k}: program {have.get(k)!r}, manifest {made_for.get(k)!r}"
                        for k in sorted(set(made_for) | set(have)) if made_for.get(k) != have.get(k)]
                raise ArtifactError(f"{d}: {PROGRAM_FILE} and {MANIFEST_FILE} are for different tiles ({'; '.join(diff)})")
            man = Manifest(
                kind=m["kind"], H=m["H"], I=m["I"], batch=m["batch"], padded=(m["padded_H"], m["padded_I"]),
                cycles=m["cycles"],
                writes=[PredictedWrite(w["cycle"], w["slice"], w["addr"], tuple(w["data"]), w["block"])
                        for w in m["writes"]],
                outputs={(o["batch"], o["block"]): (o["slice"], o["addr"]) for o in m["outputs"]},
                busy=m["busy"], mm_count=m["mm_count"], weight_vectors=m["weight_vectors"],
                sram_bound=m["sram_bound"], mac_bound=m["mac_bound"], instructions=m.get("instructions", {}),
                bounds=m.get("bounds", {}), sram_padded=m.get("sram_padded", 0), dtype=prog.config.mxm_dtype)
            ref = m.get("reference") or {}
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise ArtifactError(f"{mf} is damaged or from another version ({type(e).__name__}: {e})") from None
        return cls(name=m.get("name", d.name), program=prog, manifest=man, source=m.get("source", {}),
                   y_int8=None if ref.get("y_int8") is None else
                   np.asarray(ref["y_int8"], np.uint8 if prog.config.mxm_dtype == "fp8" else np.int8),
                   y_float=None if ref.get("y_float") is None else np.asarray(ref["y_float"], np.float64),
                   out_scale=ref.get("out_scale"))


def load_program(path) -> Program:
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path.parent} is not a compiled program directory (no {path.name}); "
                            "make one with `lpu compile --out DIR`")
    try:
        return Program.from_json(path.read_text())
    except (ValueError, KeyError, TypeError) as e:     # ProgramError, IsaError, ConfigError are ValueErrors
        raise ArtifactError(f"{path}: {e}") from None


# ---- making one -----------------------------------------------------------------------
def _compile(name, ex: Example, cfg: TileConfig, preset: str | None, source: dict) -> CompiledFfn:
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    B = man.batch
    return CompiledFfn(name=name + (f"-{preset}" if preset and preset != "default" else ""), program=prog,
                       manifest=man, source={**source, "config": preset},
                       y_int8=np.asarray(ffn_int(ex.spec, ex.x_int8)).reshape(B, -1),
                       y_float=np.asarray(ex.y_float, np.float64).reshape(B, -1),
                       out_scale=float(ex.spec.out_scale))


def from_example(cfg: TileConfig, kind: str = "swiglu", H: int = 64, I: int = 128, batch: int = 1,
                 seed: int = 1, activation: str | None = None, preset: str | None = None) -> CompiledFfn:
    """Compile the seeded random FFN of ``compile_ffn.example_ffn``."""
    _check_activation(activation)
    ex = example_ffn(kind, H, I, batch, seed=seed, activation=activation, dtype=cfg.mxm_dtype)
    return _compile(f"{kind}-H{H}-I{I}-b{batch}-s{seed}", ex, cfg, preset,
                    {"weights": "example", "kind": kind, "activation": ex.activation, "seed": seed})


def from_weights(path, cfg: TileConfig, kind: str | None = None, activation: str | None = None,
                 preset: str | None = None, layer: int | None = None, mapping=None) -> CompiledFfn:
    """Quantise and compile one FFN of a ``.safetensors`` or ``.npz`` file of float
    weights, read by ``weights.load_ffn`` (``layer``, ``mapping`` as there; ``docs/numerics.md``,
    "Weights from files"): ``W1`` (I, H), ``W2`` (H, I), ``W3`` (I, H; present = SwiGLU), the
    classic FFN's optional ``b1``, ``b2``, and ``x`` (H,) or (batch, H), which calibrates the
    scales (default: ``weights.default_calibration``).  ``kind``, if given, must be the
    file's.  Quantisation is ``FfnSpec.from_float``.  A bad file is an :class:`ArtifactError`."""
    ex, source = example_from_weights(path, kind, activation, layer, mapping, dtype=cfg.mxm_dtype)
    L = source["layer"]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(path).stem) + (f"-L{L}" if L is not None else "")
    return _compile(name, ex, cfg, preset, source)


def example_from_weights(path, kind: str | None = None, activation: str | None = None, layer: int | None = None,
                         mapping=None, dtype: str = "int8") -> tuple[Example, dict]:
    """The quantised FFN of a weights file (as :func:`from_weights`, not compiled: for a
    tray, or to size a tile with ``--fit``) and its ``source`` record."""
    path = Path(path)
    try:
        w = load_ffn(path, layer=layer, mapping=mapping)
    except WeightsError as e:
        raise ArtifactError(str(e)) from None
    if kind is not None and kind != w.kind:
        raise ArtifactError(f"--kind {kind} but {path.name} " + ("has a W3 (a SwiGLU FFN)" if w.kind == "swiglu"
                                                                 else "has no W3 (a classic FFN)"))
    _check_activation(activation)
    activation = activation or w.activation
    try:
        spec = FfnSpec.from_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, x_calibration=w.x, activation=activation,
                                  dtype=dtype)
        xq, _ = activation_quantiser(dtype)(w.x, spec.x_scale)
        y = ffn_float(w.kind, w.W1, w.W2, w.W3, w.b1, w.b2, dequantise(xq, spec.x_scale, dtype), activation)
    except NumericsError as e:
        raise ArtifactError(f"{path.name}: {e}") from None
    src = w.source
    return Example(spec, xq, y, activation), {
        "weights": str(path), "kind": w.kind, "activation": activation, "format": src["format"],
        "family": src["family"], "layer": src["layer"], "tensors": src["tensors"], "calibration": src["calibration"]}


def _check_activation(activation):
    if activation is not None and activation not in ACTIVATIONS:
        raise ArtifactError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")


def summary_rows(c: CompiledFfn) -> list[tuple[str, str]]:
    """The compile summary as (label, text) rows."""
    m, cfg = c.manifest, c.config
    b = m.bounds
    padded = m.sram_padded and m.sram_padded != m.sram_bound
    return [
        ("FFN", f"{m.kind} ({c.source.get('activation', '?')}), H={m.H}, I={m.I}, batch={m.batch}, "
                f"padded to {m.padded[0]}x{m.padded[1]}, {m.weight_vectors * cfg.lanes:,} weight bytes"),
        ("tile", f"{cfg.lanes} lanes, {cfg.streams} streams per direction, {cfg.mem_slices}+{cfg.mem_slices} "
                 f"MEM slices x {cfg.mem_depth} vectors, {cfg.mxm_dtype} MXM ({cfg.acc_bits}-bit accumulators)"),
        ("predicted cycles", f"{m.cycles:,}"),
        ("SRAM-read bound", f"{m.sram_bound:,}  (every weight vector the program reads, read once, {2 * cfg.mem_slices} MEM "
                            f"slices every cycle; " + (f"{m.sram_padded:,} reading every padded block; "
                                                       if padded else "")
                            + f"{b.get('sram_real', m.sram_bound):,} for the unpadded bytes)"),
        ("MAC bound", f"{m.mac_bound:,}  ({m.mm_count:,} MMs on 2 MXMs)"),
        *[(label, f"{b[k]:,}  ({BOUNDS[k]})") for k, label in
          (("loader_issue", "loader issue bound"), ("weight_load", "weight-load bound"), ("streams", "stream bound"),
           ("latency", "latency floor"), ("sram_path", "SRAM + path bound")) if k in b],
        ("efficiency", f"{m.efficiency:.3f}  (tightest bound / cycles: {m.tightest}; {m.cycles / m.sram_bound:.3f}x "
                       "the SRAM-read bound" + (f", {m.cycles / m.sram_padded:.3f}x reading every padded block"
                                                if padded else "") + ")"),
        ("MXM utilisation", f"{m.mxm_utilisation:.3f}"),
        ("output writes", f"{len(m.writes)}"),
        ("instructions", ", ".join(f"{n} {k}" for n, k in m.instructions.items())),
    ]

