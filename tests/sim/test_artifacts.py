"""Saved programs and compiled directories are validated when they are loaded, before
anything is built or simulated: every damaged, foreign or mismatched file is one clear
error (exit 2 on the command line) naming what is wrong, never a traceback."""

import dataclasses
import json

import numpy as np
import pytest

from lpu_arch import ConfigError, TileConfig
from firmware_gen.program import FORMAT, Program, ProgramError
from sim.cli import main as cli
from sim.cli.common import finite_json
from sim.harness.compiled import ArtifactError, CompiledFfn

TINY = ["--config", "tiny", "--H", "8", "--I", "16"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("ffn")
    assert cli.main(["compile", *TINY, "--out", str(d)]) == 0
    return d


def edited(compiled, tmp_path, edit, file="program.json"):
    """A copy of the compiled directory with ``edit(dict)`` applied to one of its files."""
    for name in ("program.json", "manifest.json"):
        d = json.loads((compiled / name).read_text())
        if name == file:
            edit(d)
        (tmp_path / name).write_text(json.dumps(d))
    return tmp_path


def set_byte(d, value):
    name = next(iter(d["memory"]))
    d["memory"][name][0][1] = value


@pytest.mark.parametrize("edit, words", [
    (lambda d: set_byte(d, 300), ["row 0", "300", "0..255"]),
    (lambda d: set_byte(d, -1), ["row 0", "-1", "0..255"]),
    (lambda d: d["memory"][next(iter(d["memory"]))][0].pop(), ["row 0", "4 bytes"]),
    (lambda d: d["config"].pop("rx_depth"), ["missing", "rx_depth"]),
    (lambda d: d["config"].update(colour=3), ["unknown", "colour"]),
    (lambda d: d.update(format="lpu-program/0"), ["lpu-program/0", FORMAT]),
    (lambda d: d.pop("table"), ["table"]),
    (lambda d: d["images"].update(MEM_W0="junk"), ["MEM_W0", "instruction words"]),
    (lambda d: d.update(vxm_params=[[1, 2], [3]]), ["VXM parameters"]),
])
def test_damaged_program_json_is_one_error(compiled, tmp_path, capsys, edit, words):
    d = edited(compiled, tmp_path, edit)
    with pytest.raises(ArtifactError) as e:
        CompiledFfn.load(d)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    code = cli.main(["show", str(d), "--chart", str(tmp_path / "x.svg")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and words[0] in err, err


@pytest.mark.parametrize("field, value", [("links", 2), ("mem_depth", 128)])
def test_program_and_manifest_from_different_tiles(compiled, tmp_path, field, value):
    """A program edited to another tile (e.g. links: 2) no longer matches its manifest:
    the load names the field, before any simulator is built."""
    d = edited(compiled, tmp_path, lambda m: m["config"].update({field: value}))
    with pytest.raises(ArtifactError, match=f"different tiles.*{field}: program"):
        CompiledFfn.load(d)


def test_manifest_of_another_version(compiled, tmp_path):
    d = edited(compiled, tmp_path, lambda m: m.update(format="lpu-compiled/1"), file="manifest.json")
    with pytest.raises(ArtifactError, match="lpu-compiled/1.*recompile"):
        CompiledFfn.load(d)


def test_round_trip_keeps_everything(compiled):
    prog = CompiledFfn.load(compiled).program
    again = Program.from_json(prog.to_json())
    assert again.images() == prog.images() and again.config == prog.config
    assert (again.table == prog.table).all() and (again.vxm_params == prog.vxm_params).all()
    assert all((again.memory[n] == prog.memory[n]).all() for n in prog.memory)


def test_config_from_dict_complete_or_partial():
    full = TileConfig.tiny().to_dict()
    assert TileConfig.from_dict(full, complete=True) == TileConfig.tiny()
    partial = {"lanes": 8}
    assert TileConfig.from_dict(partial).lanes == 8              # defaults fill the rest
    with pytest.raises(ConfigError, match="missing: streams"):
        TileConfig.from_dict({"lanes": 8}, complete=True)


def test_not_json():
    with pytest.raises(ProgramError, match="not JSON"):
        Program.from_json("{")


@pytest.mark.parametrize("argv", [["--ppm", "nan", "0"], ["--beyond-spec", "--ppm", "-1000000", "0"],
                                  ["--beyond-spec", "--ppm", "0", "inf"]])
def test_c2c_rejects_clocks_it_cannot_simulate(capsys, argv):
    """Checked when parsed, before any build: a NaN or absurd clock offset is one line, exit 2."""
    with pytest.raises(SystemExit) as e:
        cli.main(["c2c", *argv])
    code = e.value.code
    err = capsys.readouterr().err
    assert code == 2 and "cannot be simulated" in err and "100000 ppm" in err and "Traceback" not in err, err


# ---- weights and numbers ---------------------------------------------------------------------
def weights(tmp_path, scale=1.0, transpose=False, empty=False):
    rng = np.random.default_rng(0)
    H, I = (8, 0) if empty else (8, 16)
    W1 = rng.normal(size=(I, H)) * scale
    np.savez(tmp_path / "w.npz", W1=W1.T if transpose else W1, W2=rng.normal(size=(H, I)),
             W3=rng.normal(size=(I, H)), x=rng.normal(size=H))
    return tmp_path / "w.npz"


@pytest.mark.parametrize("make, words", [
    (lambda p: p, ["is a directory"]),
    (lambda p: weights(p, transpose=True), ["W1 in w.npz is 8x16 but W3 and W2 give I x H = 16x8",
                                            "W1 must be I x H = 16x8 (it looks transposed)"]),
    (lambda p: weights(p, empty=True), ["H >= 1 and I >= 1"]),
    (lambda p: weights(p, scale=5e307), ["does not fit float64", "scale them down"]),
])
def test_bad_weights_are_named(tmp_path, capsys, make, words):
    path = make(tmp_path)
    code = cli.main(["compile", "--config", "tiny", "--weights", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and all(w in err for w in words), err


def test_huge_weights_give_finite_numbers_and_strict_json(tmp_path, capsys):
    """Weights x 1e300 still fit float64: the compile works and every number it reports,
    the error against float included, is finite (strict JSON, no NaN)."""
    from firmware_gen.golden import archmodel
    from firmware_gen.compiler.ffn_manifest import output_matrix
    code = cli.main(["compile", "--config", "tiny", "--weights", str(weights(tmp_path, 1e300)), "--json",
                     "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 0
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    c = CompiledFfn.load(tmp_path / "o")
    y = output_matrix(c.manifest, archmodel.run(c.program).memory, c.config.lanes, c.manifest.H)
    err = c.error_vs_float(y)
    assert np.isfinite(err["cosine"]) and err["cosine"] > 0.99, err


def test_json_output_never_holds_nan():
    assert finite_json({"a": float("nan"), "b": [1.0, float("inf")], "c": (2, "x")}) == \
        {"a": None, "b": [1.0, None], "c": [2, "x"]}


def test_timeout_follows_the_program_length():
    """A legal program longer than a million cycles gets a testbench timeout from its own
    length (the fixed 1,000,000 cut it off), and a short one a short timeout."""
    from lpu_arch.isa import Instr
    from sim.harness.runner import job, run_length, system_run
    cfg = dataclasses.replace(TileConfig.tiny(), iq_depth=128)
    row0 = {"MEM_W1": [[1] * cfg.lanes]}         # the row the READs read (SRAM powers up random)
    long = Program(cfg, {"MEM_W1": [Instr.nop(15_000)] * 120 + [Instr.read(0, 0, 0)]}, row0)
    assert run_length(long) == 1_800_002
    assert job(long)["timeout_cycles"] >= 2 * 1_800_002
    short = Program(cfg, {"MEM_W1": [Instr.read(0, 0, 0)]}, row0)
    assert job(short)["timeout_cycles"] < 20_000 and job(short, timeout_cycles=7)["timeout_cycles"] == 7
    assert system_run([long, short], [0, 0])["timeout_cycles"] >= 2 * 1_800_002


def test_config_file_may_be_partial(tmp_path, capsys):
    """--config FILE.json: the fields it gives, the default tile's for the rest; a bad file is
    one error naming the field."""
    f = tmp_path / "tile.json"
    f.write_text(json.dumps({"lanes": 8, "mem_depth": 256, "iq_depth": 256}))
    assert cli.main(["compile", "--config", str(f), "--H", "16", "--I", "32", "--out", str(tmp_path / "o")]) == 0
    cfg = CompiledFfn.load(tmp_path / "o").config
    assert (cfg.lanes, cfg.mem_depth, cfg.streams) == (8, 256, TileConfig().streams)
    f.write_text(json.dumps({"lanes": 7}))
    with pytest.raises(SystemExit) as e:          # argparse rejects the option's value
        cli.main(["compile", "--config", str(f)])
    assert e.value.code == 2 and "lanes must be a multiple of 4" in capsys.readouterr().err


def test_a_send_without_its_recv_is_refused_before_loading():
    """The system harness checks a tray's programs as a system: a SEND whose RECV was
    removed is a CheckError naming the link, before anything is built."""
    import dataclasses
    from firmware_gen.check import CheckError
    from lpu_arch.isa import Op
    from sim.flows.c2c import c2c_config, exchange
    from sim.harness.runner import system_run
    programs = exchange(dataclasses.replace(c2c_config(), links=1), 2, 2, 0, seed=1).programs()
    system_run(programs, [0, 0])                         # clean: accepted
    q = programs[1].queues["C2C_W"]
    programs[1].queues["C2C_W"] = [i for i in q if i.op != Op.RECV]
    with pytest.raises(CheckError, match="link-unmatched"):
        system_run(programs, [0, 0])
    system_run(programs, [0, 0], checked=False)          # on purpose: loads anyway
