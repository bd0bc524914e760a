"""A fresh machine: the Makefile's venv bootstrap and CI's list of packages to install
(.ci/run), run against stand-in interpreters."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _fake_python(tmp_path, version=(3, 11, 7), venv_fails=False) -> Path:
    """A ``python3`` that reports ``version`` and whose ``-m venv`` fails as Debian's does
    without python3-venv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(f"""#!{sys.executable}
import sys
if sys.argv[1:3] == ["-m", "venv"] and {venv_fails}:
    sys.exit("The virtual environment was not created successfully because ensurepip is not available.")
sys.version_info = {tuple(version) + ("final", 0)!r}
if sys.argv[1:2] == ["-c"]:
    exec(sys.argv[2])
else:
    import runpy
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
""")
    fake.chmod(0o755)
    return fake


def _make_env(fake, venv):
    return subprocess.run(["make", "-s", "env", f"PYTHON={fake}", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_names_the_python_version_it_needs(tmp_path):
    p = _make_env(_fake_python(tmp_path, (3, 10, 14)), tmp_path / ".venv")
    assert p.returncode != 0
    assert "error: Python >= 3.11 is required, found 3.10" in p.stderr
    assert not (tmp_path / ".venv").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_names_python3_venv_when_a_venv_cannot_be_made(tmp_path):
    p = _make_env(_fake_python(tmp_path, venv_fails=True), tmp_path / ".venv")
    assert p.returncode != 0 and "sudo apt-get install python3-venv" in p.stdout + p.stderr
    assert not (tmp_path / ".venv").exists()           # not left half made for the next make


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="Debian/Ubuntu only")
def test_ci_lists_what_a_bare_machine_lacks(tmp_path):
    """On a PATH with only Python (without venv), dpkg-query and the shell's tools, .ci/run
    --dry-run names every package the suite needs."""
    fake = _fake_python(tmp_path, venv_fails=True)
    for tool in ("bash", "dpkg-query", "env", "mktemp", "rm", "dirname"):
        (fake.parent / tool).symlink_to(shutil.which(tool))
    p = subprocess.run(["bash", str(ROOT / ".ci/run"), "--dry-run"], capture_output=True, text=True,
                       env={**os.environ, "PATH": str(fake.parent)})
    assert p.returncode == 0, p.stderr
    wanted = {"python3-venv", "iverilog", "make", "g++", "perl", "ccache"}
    if subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status}", "liblz4-dev"], capture_output=True,
                      text=True).stdout != "installed":
        wanted.add("liblz4-dev")
    assert p.stdout.startswith("would install: ") and set(p.stdout.split()[2:]) == wanted, p.stdout


def test_ci_stops_on_an_old_python(tmp_path):
    fake = _fake_python(tmp_path, (3, 10, 14))
    p = subprocess.run(["bash", str(ROOT / ".ci/run"), "--dry-run"], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert p.returncode == 1 and "error: Python >= 3.11 is required, found 3.10" in p.stderr
