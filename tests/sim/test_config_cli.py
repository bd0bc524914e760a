"""Tiles sized by the user: --config PRESET|FILE.toml|FILE.json, --set FIELD=VALUE, and
--fit (the smallest power-of-two depths that hold an FFN, printed as a config file)."""

import dataclasses
import json

import pytest

from lpu_arch import ConfigError, TileConfig
from firmware_gen.compiler.ffn import CompileError, compile_ffn, example_ffn
from firmware_gen.compiler.fit import FIELDS, fit_ffn
from firmware_gen.compiler.tray import compile_ffn_tray
from sim.cli import main as cli

from tests.helpers import SIMS


def run(capsys, *argv):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as e:        # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_load_presets_files_and_overrides(tmp_path):
    assert TileConfig.load("tiny") == TileConfig.tiny()
    (tmp_path / "t.toml").write_text("# a tile\nlanes = 8\nmem_depth = 256\n")
    (tmp_path / "t.json").write_text(json.dumps({"lanes": 8, "mem_depth": 256}))
    want = dataclasses.replace(TileConfig.default(), lanes=8, mem_depth=256)
    assert TileConfig.load(str(tmp_path / "t.toml")) == want == TileConfig.load(str(tmp_path / "t.json"))
    assert TileConfig.load("tiny", ["mem_depth=128", " iq_depth = 0x100 "]) == \
        dataclasses.replace(TileConfig.tiny(), mem_depth=128, iq_depth=256)
    cfg = TileConfig.tiny().with_overrides(["rx_depth=4"])
    assert TileConfig.load(_write(tmp_path / "back.toml", cfg.to_toml("round trip"))) == cfg


def test_layouts_order_the_slices():
    """The edge layout puts the MXMs at the ends, the center layout beside the VXM; every
    name keeps its meaning (MEM_W0 and MEM_E0 nearest the VXM) and the queues follow."""
    edge, center = TileConfig.tiny(), TileConfig.load("tiny", ["mxm_layout=center"])
    assert edge.slice_names == ["MXM_W", "SXM_W", "MEM_W1", "MEM_W0", "VXM", "MEM_E0", "MEM_E1", "SXM_E", "MXM_E"]
    assert center.slice_names == ["SXM_W", "MEM_W1", "MEM_W0", "MXM_W", "VXM", "MXM_E", "MEM_E0", "MEM_E1", "SXM_E"]
    assert center.vxm_position == 4 == edge.vxm_position and center.positions == edge.positions
    assert center.queue_names[-2:] == ["MXL_W", "MXL_E"] and center.position("MXL_E") == 5
    assert TileConfig.lp30().mxm_layout == "center"


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("make, message", [
    (lambda d: TileConfig.load("huge"), r"huge is neither a preset \(default, tiny, board, full_scale, lp30\) nor a configuration file"),
    (lambda d: TileConfig.load(_write(d / "x.toml", "lanes = [")), r"x.toml is not TOML"),
    (lambda d: TileConfig.load(_write(d / "x.json", "{")), r"x.json is not JSON"),
    (lambda d: TileConfig.load(_write(d / "x.toml", "lane = 8")), r"unknown configuration field\(s\): lane \(the fields: lanes, "),
    (lambda d: TileConfig.load("tiny", ["mem_depth=100"]), r"mem_depth must be a power of two in 2\.\.\d+, got 100"),
    (lambda d: TileConfig.load("tiny", ["mem_depth"]), r"--set takes FIELD=VALUE"),
    (lambda d: TileConfig.load("tiny", ["mem_depth=big"]), r"--set mem_depth=big: the value must be an integer"),
    (lambda d: TileConfig.load("tiny", ["lanes=6"]), r"lanes must be a multiple of 4"),
    (lambda d: TileConfig.load(_write(d / "x.json", '{"vxm_latency": 3.0}')), r"vxm_latency must be an integer, got 3\.0"),
    (lambda d: TileConfig.load("tiny", ["mxm_layout=middle"]), r"mxm_layout must be one of edge, center, got 'middle'"),
    (lambda d: TileConfig.load("tiny", ["mxm_layout=center", "links=2"]),
     r"mxm_layout 'center' is for single tiles \(links = 0; .*got links = 2"),
])
def test_bad_configurations_are_one_line_config_errors(tmp_path, make, message):
    with pytest.raises(ConfigError, match=message):
        make(tmp_path)


@pytest.mark.parametrize("argv, message", [
    (["compile", "--config", "tiny", "--set", "mem_depth=100"], "mem_depth must be a power of two"),
    (["compile", "--config", "nope.toml"], "nope.toml is neither a preset"),
    (["tray", "--no-run", "--set", "streams=200"], "streams per direction must be in 1.."),
    (["compile", "--layer", "1"], "--layer and --map select tensors of a --weights file"),
    (["compile", "--fit", "--out", "x"], "--fit prints a configuration and compiles nothing"),
])
def test_cli_config_errors(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_fit_is_the_smallest_power_of_two_that_holds_the_ffn():
    """Each fitted depth holds what the schedule needs, and halving any of them makes the
    compiler refuse the FFN (naming what does not fit)."""
    ex = example_ffn("swiglu", 24, 40, 2, seed=4)
    cfg, need = fit_ffn(ex.spec, ex.x_int8, TileConfig.tiny())
    assert set(need) == set(FIELDS)
    for k in FIELDS:
        v = getattr(cfg, k)
        assert v >= need[k] and (v == 2 or v // 2 < need[k]), (k, v, need[k])
    prog, man = compile_ffn(ex.spec, ex.x_int8, cfg)
    for k in ("mem_depth", "iq_depth", "mxm_acc_depth", "mxm_xbuf_depth", "vxm_param_depth"):
        if getattr(cfg, k) > 2:
            with pytest.raises(CompileError):
                compile_ffn(ex.spec, ex.x_int8, dataclasses.replace(cfg, **{k: getattr(cfg, k) // 2}))
    assert max(sum(w.slice == m for w in man.writes) for m in cfg.mem_names) == need["trace_depth"]


def test_fit_a_tray():
    ex = example_ffn("classic", 32, 96, 1, seed=2)
    with pytest.raises(CompileError):
        compile_ffn_tray(ex.spec, ex.x_int8, TileConfig.tiny(), 4)
    cfg, need = fit_ffn(ex.spec, ex.x_int8, TileConfig.tiny(), 4)
    assert cfg.links == 3 and cfg.lanes == TileConfig.tiny().lanes
    compile_ffn_tray(ex.spec, ex.x_int8, cfg, 4)


def test_fit_prints_a_config_the_compiler_takes(capsys, tmp_path):
    code, toml, _ = run(capsys, "compile", "--kind", "classic", "--H", "48", "--I", "96", "--config", "tiny", "--fit")
    assert code == 0 and toml.startswith("# lpu --fit") and "needs: mem_depth" in toml
    path = tmp_path / "fitted.toml"
    path.write_text(toml)
    code, out, err = run(capsys, "compile", "--kind", "classic", "--H", "48", "--I", "96", "--config", path,
                         "--out", tmp_path / "c", "--json")
    assert code == 0, err
    assert json.loads(out)["cycles"] > 0
    code, out, _ = run(capsys, "tray", "--kind", "classic", "--H", "48", "--I", "96", "--tiles", "2", "--fit", "--json")
    assert code == 0 and json.loads(out)["config"]["links"] == 1


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_real_model_files_end_to_end(capsys, tmp_path, family):
    """A Hugging Face-named safetensors file (Llama-style in bfloat16, BERT-style with
    biases): --fit sizes a tile to layer 0's FFN, lpu compile takes that TOML file, and lpu
    tray splits the same FFN across 2 tiles; the compiled outputs are the integer FFN's."""
    import numpy as np
    from sim.harness.compiled import CompiledFfn
    from tests.firmware_gen.test_weights import bert_tensors, llama_tensors, write_safetensors
    make = llama_tensors if family == "llama" else bert_tensors
    path = write_safetensors(tmp_path / f"{family}.safetensors", make(np.random.default_rng(3)))
    weights = ["--weights", path, "--layer", 0]
    code, toml, err = run(capsys, "compile", *weights, "--config", "tiny", "--fit")
    assert code == 0, err
    (tmp_path / "tile.toml").write_text(toml)
    code, out, err = run(capsys, "compile", *weights, "--config", tmp_path / "tile.toml", "--out", tmp_path / "c",
                         "--json")
    assert code == 0, err
    c = CompiledFfn.load(tmp_path / "c")
    assert c.source["family"] == family and c.program.config == TileConfig.load(str(tmp_path / "tile.toml"))
    code, out, err = run(capsys, "tray", *weights, "--tiles", 2, "--no-run", "--json")
    assert code == 0, err
    tray = json.loads(out)
    assert tray["kind"] == c.manifest.kind and (tray["H"], tray["I"]) == (c.manifest.H, c.manifest.I)
    code, out, err = run(capsys, "tray", *weights, "--tiles", 2, "--no-run", "--H", 8)
    assert code == 2 and "--H cannot be used with --weights" in err


@pytest.mark.sim
@pytest.mark.parametrize("sim", SIMS)
def test_a_safetensors_ffn_runs_on_the_rtl(capsys, tmp_path, sim):
    """A Llama-style bfloat16 layer from a safetensors file, compiled for the tiny tile and
    run by lpu sim: bit-exact against the integer FFN, every write at its predicted cycle."""
    import numpy as np
    from tests.firmware_gen.test_weights import llama_tensors, write_safetensors
    path = write_safetensors(tmp_path / "llama.safetensors", llama_tensors(np.random.default_rng(5)))
    code, out, err = run(capsys, "sim", "--weights", path, "--layer", 1, "--config", "tiny",
                         "--out", tmp_path / "c", "--sim", sim, "--json", "-q")
    r = json.loads(out)
    assert code == 0 and r["passed"], err
    assert r["cycles"] == r["predicted_cycles"] == r["golden_model_cycles"]
    assert r["bit_exact"] and r["writes_as_predicted"]
