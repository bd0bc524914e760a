"""The ``lpu`` command on bad input: one error line, exit status 2, no traceback; program
directories written whole and never replaced unasked; a closed stdout pipe ends quietly."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main as cli
from sim.cli.decode import MAX_TOKENS

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--config", "tiny", "--H", "8", "--I", "16"]


def lpu(capsys, *argv):
    """``lpu ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as e:                 # argparse's errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error(capsys, *argv, words=()) -> str:
    code, _, err = lpu(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, code, err)
    assert " error: " in lines[0], lines
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# ---- numbers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["decode", "--no-run", "--clock-mhz", "-900", "--json"], ["--clock-mhz", "above 0", "'-900'"]),
    (["decode", "--no-run", "--clock-mhz", "0"], ["--clock-mhz", "above 0"]),
    (["decode", "--no-run", "--hbm-gbs", "-5"], ["--hbm-gbs", "above 0"]),
    (["decode", "--no-run", "--hbm-gbs", "nan"], ["--hbm-gbs", "finite"]),
    (["decode", "--no-run", "--hbm-gbs", "inf"], ["--hbm-gbs", "finite"]),
    (["plan", "--model", "deepseek-r1", "--hop-ns", "-1"], ["--hop-ns", "at least 0"]),
    (["plan", "--model", "deepseek-r1", "--clock-mhz", "nan"], ["--clock-mhz", "finite"]),
    (["bench", "--passes", "0"], ["--passes", "positive"]),
])
def test_nonsense_numbers_rejected(capsys, argv, words):
    one_error(capsys, *argv, words=words)


def test_tokens_limit_names_itself(capsys):
    one_error(capsys, "decode", "--no-run", "--tokens", "100000", words=["--tokens", f"at most {MAX_TOKENS}"])


@pytest.mark.parametrize("argv, words", [
    (["c2c", "--ppm", "0", "-1e6"], ["--ppm", "-1e6 ppm cannot be simulated", "100000 ppm"]),
    (["c2c", "--ppm", "0", "-inf"], ["--ppm", "-inf ppm cannot be simulated"]),
    (["moe", "--no-run", "--routing", "-1,2"], ["expert -1 does not exist"]),
])
def test_negative_numbers_are_values(capsys, argv, words):
    """-1e6 and -1,2 reach the option's own check (not "expected 2 arguments")."""
    line = one_error(capsys, *argv, words=words)
    assert "expected" not in line


# ---- program directories -----------------------------------------------------------------------
def test_compile_refuses_another_program(capsys, tmp_path):
    out = tmp_path / "p"
    assert lpu(capsys, "compile", *TINY, "--out", out)[0] == 0
    first = (out / "program.json").read_text()
    assert lpu(capsys, "compile", *TINY, "--out", out)[0] == 0        # the same program: left as it is
    one_error(capsys, "compile", "--config", "tiny", "--H", "16", "--I", "16", "--out", out,
              words=["holds another program", "--force"])
    assert (out / "program.json").read_text() == first
    code, text, _ = lpu(capsys, "compile", "--config", "tiny", "--H", "16", "--I", "16", "--out", out, "--force")
    assert code == 0 and "H16" in text and (out / "program.json").read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]        # no temporary directory left


def test_program_dir_refusals(capsys, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    one_error(capsys, "compile", *TINY, "--out", tmp_path / "notes", "--force", words=["holds no program"])
    assert (tmp_path / "notes" / "a.txt").read_text() == "mine"
    one_error(capsys, "compile", *TINY, "--force", words=["--force", "--out"])
    src = tmp_path / "copy.s"
    src.write_text("[MEM_W0]\nNOP 1\n")
    assert lpu(capsys, "compile", *TINY, "--out", tmp_path / "c")[0] == 0
    one_error(capsys, "asm", src, "--out", tmp_path / "c", words=["holds another program"])


def test_interrupted_write_leaves_the_old_directory(capsys, tmp_path, monkeypatch):
    """A run stopped while writing (here: the second file) leaves the old program whole."""
    out = tmp_path / "p"
    assert lpu(capsys, "compile", *TINY, "--out", out)[0] == 0
    before = {p.name: p.read_text() for p in out.iterdir()}
    real_write = Path.write_text

    def write(self, text, *a, **kw):
        if self.name == "manifest.json":
            raise KeyboardInterrupt
        return real_write(self, text, *a, **kw)

    monkeypatch.setattr(Path, "write_text", write)
    code, _, err = lpu(capsys, "compile", "--config", "tiny", "--H", "16", "--I", "16", "--out", out, "--force")
    assert code == 130 and "interrupted" in err
    assert {p.name: p.read_text() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]


# ---- files ---------------------------------------------------------------------------------------
def test_asm_binary_file(capsys, tmp_path):
    f = tmp_path / "prog.s"
    f.write_bytes(bytes(range(128, 256)))
    one_error(capsys, "asm", f, "--out", tmp_path / "o", words=["not a file of assembly text", "UTF-8"])


def moe_file(tmp_path, drop=None, dense=False):
    rng = np.random.default_rng(0)
    H, I, E = 8, 8, 4
    if dense:
        t = {"W1": rng.normal(size=(I, H)), "W3": rng.normal(size=(I, H)), "W2": rng.normal(size=(H, I))}
    else:
        p = "model.layers.0.mlp."
        t = {p + "gate.weight": rng.normal(size=(E, H))}
        for e in range(E):
            for proj, shape in (("gate", (I, H)), ("up", (I, H)), ("down", (H, I))):
                t[f"{p}experts.{e}.{proj}_proj.weight"] = rng.normal(size=shape)
        t.pop(drop, None)
    np.savez(tmp_path / "m.npz", **{k.replace(".", "__") if False else k: v for k, v in t.items()})
    return tmp_path / "m.npz"


@pytest.mark.parametrize("make, words", [
    (lambda p: moe_file(p, drop="model.layers.0.mlp.experts.2.up_proj.weight"), ["experts.2.up_proj"]),
    (lambda p: moe_file(p, dense=True), ["no MoE layer"]),
    (lambda p: (p / "t.safetensors").write_bytes(b"\x10\x00\x00") and p / "t.safetensors", ["truncated"]),
    (lambda p: p, ["directory"]),
])
def test_moe_weights_errors_are_one_line(capsys, tmp_path, make, words):
    one_error(capsys, "moe", "--no-run", "--weights", make(tmp_path), words=words)


# ---- messages ------------------------------------------------------------------------------------
def test_set_on_a_program_dir_names_its_tile(capsys, tmp_path):
    assert lpu(capsys, "compile", *TINY, "--out", tmp_path / "p")[0] == 0
    line = one_error(capsys, "sim", tmp_path / "p", "--set", "lanes=8", words=["--set lanes=8", "lanes 4 (asked: 8)"])
    assert "--config" not in line


def test_broken_pipe_is_quiet(tmp_path):
    """stdout's reader gone before the JSON is written: no message, exit status 141."""
    r, w = os.pipe()
    os.close(r)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "sim.cli", "compile", *TINY, "--out", str(tmp_path / "p"), "--json"],
                       stdout=w, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, timeout=120)
    os.close(w)
    assert p.returncode == 141 and p.stderr == "", p.stderr


def test_broken_pipe_in_process(capsys, tmp_path, monkeypatch):
    class Closed:
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert cli.main(["compile", *TINY, "--out", str(tmp_path / "p"), "--json"]) == 141
    assert capsys.readouterr().err == ""


def test_user_errors_share_one_base():
    """Every error class of the project derives from LpuError, but the compiler's internal
    ReservationError (two users of one slot: a compiler bug, not bad input)."""
    from lpu_arch.errors import LpuError
    internal = {"ReservationError"}
    found = []
    for pkg in ("lpu_arch", "hdl", "firmware_gen", "sim"):
        for f in (ROOT / pkg).rglob("*.py"):
            for m in re.finditer(r"^class (\w+Error)\(", f.read_text(), re.M):
                found.append((f, m.group(1)))
    assert len(found) > 10
    import importlib
    for f, name in found:
        mod = importlib.import_module(".".join(f.relative_to(ROOT).with_suffix("").parts))
        if name not in internal:
            assert issubclass(getattr(mod, name), LpuError), f"{f}: {name}"


# ---- every option with bad values ----------------------------------------------------------------
# Subcommands run with these first: each stops before any simulator when an option is accepted
# that should not have been, so that a missing check fails here fast instead of starting a run.
STOP_EARLY = {"decode": ["--no-run"], "moe": ["--no-run"], "tray": ["--no-run"], "compile": ["--config", "tiny"]}
# Options of subcommands that cannot stop before a run (lpu sim, c2c, synth, bench): only values
# their type rejects are given, so none starts one.  Path values of these are not given at all:
NO_PATH_VALUES = {("c2c", "--figures"), ("synth", "--out"), ("bench", "--out"), ("bench", "--history")}
NUMBERS = ("0", "-1", "nan", "inf", "-inf", "1e400", "99999999999999999999")
OUTPUT_DESTS = {"out", "chart", "plot", "figures", "history"}      # written: a missing path is fine


def subparsers():
    ap = cli.build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def numeric(action) -> bool:
    try:
        v = action.type("1")
    except Exception:
        return False
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def pathish(action) -> bool:
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    return action.type is Path or any(w in metavar for w in ("FILE", "DIR", "PATH"))


def accepted(action, text: str) -> bool:
    """Whether the option's own rule (its argparse type and choices) takes ``text``."""
    try:
        v = action.type(text) if action.type else text
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    return action.choices is None or v in action.choices


def cases():
    out = []
    for name, p in subparsers().items():
        for a in p._actions:
            opt = a.option_strings[-1] if a.option_strings else None
            if a.nargs == 0 or isinstance(a, argparse._HelpAction) or a.type is None and not pathish(a):
                continue
            if numeric(a):
                out += [(name, opt, a.dest, "number", v) for v in NUMBERS]
            elif pathish(a) and (name, opt) not in NO_PATH_VALUES:
                out += [(name, opt, a.dest, "path", v) for v in ("dir", "missing", "garbage")]
    return out


def test_numeric_options_declare_their_range():
    """No numeric option takes bare int or float (NaN, infinities, negatives): each has a
    type of sim.cli.options that states its range, or a list of choices."""
    for name, p in subparsers().items():
        for a in p._actions:
            if a.type in (int, float) and not a.choices:
                raise AssertionError(f"lpu {name} {a.option_strings}: type {a.type.__name__} without a range")


@pytest.mark.parametrize("name, opt, dest, kind, value", cases(), ids=lambda v: str(v))
def test_every_option_bad_values(capsys, tmp_path, name, opt, dest, kind, value):
    """Every subcommand's numeric and path options, walked from the parser: a value the
    option's rule rejects (or a path that is a directory, missing or binary garbage where a
    file is read) is one error line, exit status 2, no traceback.  Values the rule takes
    (zero for a seed, a negative clock offset) are legal and not run."""
    action = next(a for a in subparsers()[name]._actions if a.dest == dest)
    if kind == "path":
        garbage = tmp_path / "garbage.bin"
        garbage.write_bytes(bytes(range(256)) * 4)
        value = {"dir": tmp_path, "missing": tmp_path / "missing.x", "garbage": garbage}[value]
        if dest in OUTPUT_DESTS and action.type is Path and kind == "path" and value != garbage:
            pytest.skip("a missing path or a directory is a valid output directory")
    elif accepted(action, value):
        pytest.skip("legal by the option's rule")
    nargs = action.nargs if isinstance(action.nargs, int) else 1
    argv = [name, *STOP_EARLY.get(name, [])]
    argv += [opt, *[str(value)] * nargs] if opt else [str(value)]
    if name == "moe" and dest == "model_config":
        argv += ["--weights", str(tmp_path / "missing.npz")]
    one_error(capsys, *argv)
