"""Every example in every ``lpu ... --help`` and in the README works as documented.

Examples that only compile or draw run for real (in a scratch directory, ``/tmp/`` paths
moved into it); examples that build a simulator are parsed, and the FFN they name is
compiled (``lpu tray`` with ``--no-run``, ``lpu sim`` through ``lpu compile`` with the same
FFN options), so that a documented shape that does not fit, or an option that no longer
exists, fails here."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
RUN = {"compile", "show"}                 # cheap: run as written
SIM_ONLY = {"--sim", "--waves", "--json", "--quiet"}


def help_examples() -> list[str]:
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None)
                and isinstance(a.choices, dict))
    out = []
    for name, sub in subs.choices.items():
        text = sub.epilog or ""
        if "examples:" in text:
            out += [line.strip() for line in text.split("examples:", 1)[1].splitlines()
                    if line.strip().startswith("lpu ")]
    return out


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = [m.group(1) for m in re.finditer(r"`(lpu [^`]+)`", text)]
    found += [line.strip() for line in text.splitlines() if line.strip().startswith("lpu ")]
    # Placeholders (DIR, FILE) and bare command names in tables are not runnable examples.
    return sorted({c for c in found if not re.search(r"\b[A-Z]{3,}\b|\[", c) and len(c.split()) > 2})


def commands(example: str, tmp: Path) -> list[list[str]]:
    """The ``lpu`` argument lists of one example line (``&&`` chains, comments,
    redirections and pipes removed, ``/tmp/`` moved into ``tmp``)."""
    example = re.sub(r"\s{2,}(\(|#).*$", "", example).replace("/tmp/", f"{tmp}/")   # a trailing (comment)
    out = []
    for part in example.split("&&"):
        words = shlex.split(part)
        for cut in (">", "|"):                  # a redirection or a pipe: the lpu part alone
            if cut in words:
                words = words[:words.index(cut)]
        assert words[0] == "lpu", example
        out.append(words[1:])
    return out


EXAMPLES = sorted(set(help_examples()) | set(readme_examples()))


def test_examples_were_found():
    subs = {e.split()[1] for e in EXAMPLES}
    assert {"compile", "sim", "show", "tray", "c2c"} <= subs, EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
def test_example(example, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if "ffn.npz" in example:                       # the weights file the example names
        rng = np.random.default_rng(0)
        np.savez(tmp_path / "ffn.npz", W1=rng.normal(size=(64, 32)), W2=rng.normal(size=(32, 64)),
                 W3=rng.normal(size=(64, 32)), x=rng.normal(size=32))
    if "model.safetensors" in example:             # a checkpoint with Hugging Face names (Llama-style, bf16)
        from tests.safetensors_files import llama_tensors, write_safetensors
        write_safetensors(tmp_path / "model.safetensors", llama_tensors(np.random.default_rng(0), layers=1))
    if "tile.toml" in example and "--fit" not in example:      # what the --fit example wrote
        assert cli.main(["compile", "--weights", "model.safetensors", "--layer", "0", "--fit"]) == 0
        (tmp_path / "tile.toml").write_text(capsys.readouterr().out)
    if "build/lpu/" in example:                    # what a bare `lpu compile` writes
        assert cli.main(["compile"]) == 0
    if "/tmp/ffn" in example and "lpu compile" not in example:   # a directory an earlier example made
        assert cli.main(["compile", "--out", str(tmp_path / "ffn")]) == 0
    for argv in commands(example, tmp_path):
        sub = argv[0]
        cli.build_parser().parse_args(argv)        # every option exists and its value is legal
        if sub in RUN:
            run = argv
        elif sub == "tray":
            run = argv + ["--no-run"] if "--no-run" not in argv else argv
            run = [a for a in run if a not in SIM_ONLY and a not in ("icarus", "verilator")]
        elif sub == "sim" and argv[1:2] and argv[1].startswith("-"):    # compiles from FFN options
            run = ["compile"] + [a for a in argv[1:] if a not in SIM_ONLY and a not in ("icarus", "verilator")]
        else:
            continue                               # a simulator run: parsed above
        code = cli.main([str(a) for a in run])
        err = capsys.readouterr().err
        assert code == 0, f"{example}: lpu {' '.join(run)} exited {code}: {err}"
