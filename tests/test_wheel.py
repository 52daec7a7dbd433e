"""The wheel alone: built from this tree, installed into a fresh venv that sees its core dependencies only.

The fresh venv gets no package of this one but the distributions the wheel's own ``Requires-Dist``
pulls in (transitively, extras excluded): they are linked from this venv's site-packages into a
folder the fresh venv adds to its path, so nothing is downloaded or unpacked again, and pip, given
no index, must find every core requirement satisfied there. From a folder outside the repository
the installed ``rlpipe run params.yaml`` solves the default CartPole, and a feature whose extra is
missing stops with its one line (exit 2, nothing written).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from collections import defaultdict
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rlpipe.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "rlpipe")
"""What the wheel is built from (copied, so the build writes nothing into the checkout)."""
MISSING = {
    "env.id=HalfCheetah-v5": "env.id: HalfCheetah-v5 needs envpool: pip install 'rlpipe[envpool]'",
    "trainer.data_dir=s3://bucket/runs": (
        "params.yaml: trainer.data_dir: s3://bucket/runs needs s3fs: pip install 'rlpipe[s3]'"
    ),
}
"""``--set`` of a feature whose extra the core install lacks → the one line it must print."""

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(1800)]


def run(args: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MLFLOW_TRACKING_URI") and not k.startswith("DVC_")
    }
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )
    if check:
        assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def tracked_sources(dest: Path) -> list[str]:
    """Copy the files of :data:`SOURCES` git would commit (tracked, or untracked and not ignored)."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *SOURCES], ROOT)
    copied = []
    for rel in filter(None, listed.stdout.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
            copied.append(rel)
    return copied


def build_wheel(tmp_path: Path) -> tuple[Path, list[str]]:
    """The wheel of this tree, and the package files it was built from (``rlpipe/…``)."""
    source, dist = tmp_path / "source", tmp_path / "dist"
    copied = tracked_sources(source)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-isolation"]
    run([sys.executable, "-m", "build", "--wheel", *isolation, "--outdir", dist, source], tmp_path)
    (wheel,) = dist.glob("rlpipe-*.whl")
    return wheel, [rel for rel in copied if rel.startswith("rlpipe/")]


def core_closure(requires: list[str]) -> set[str]:
    """Canonical names of this venv's distributions that ``requires`` pulls in without extras, transitively.

    A requirement this venv cannot satisfy (absent, or at a version outside its specifier) fails here.
    """
    names: set[str] = set()
    seen: set[tuple[str, str]] = set()
    todo = [(Requirement(line), "") for line in requires]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{req} (a core requirement) is not installed in this venv")
        assert req.specifier.contains(dist.version, prereleases=True), f"{req}: this venv has {dist.version}"
        names.add(canonicalize_name(req.name))
        for wanted in ("", *req.extras):
            if (canonicalize_name(req.name), wanted) not in seen:
                seen.add((canonicalize_name(req.name), wanted))
                todo += [(Requirement(line), wanted) for line in dist.requires or []]
    return names


def link_files(src: Path, dest: Path, files: list[tuple[tuple[str, ...], bool]]) -> None:
    """Symlink each entry of ``src`` whose recorded files are all wanted; split folders that mix both.

    ``files``: ``(path parts relative to src, wanted)`` of every file the distributions record there.
    """
    dest.mkdir(exist_ok=True)
    below: dict[str, list[tuple[tuple[str, ...], bool]]] = defaultdict(list)
    for parts, wanted in files:
        below[parts[0]].append((parts[1:], wanted))
    for name, entries in below.items():
        kinds = {wanted for _, wanted in entries}
        if kinds == {True} and (src / name).exists():
            (dest / name).symlink_to(src / name)
        elif True in kinds:  # a folder two distributions share (a namespace package, __pycache__)
            link_files(src / name, dest / name, [(p, w) for p, w in entries if p])


def core_site(wheel: Path, dest: Path) -> Path:
    """``dest`` holding links to exactly the distributions of the wheel's core closure (see module doc)."""
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = Parser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist") or []
    closure = core_closure(requires)
    assert "torch" in closure and not closure & {canonicalize_name(d) for d, _ in EXTRAS.values()}
    site = Path(importlib.metadata.distribution("torch").locate_file(""))
    files = []
    for dist in importlib.metadata.distributions():
        if Path(dist.locate_file("")) == site:
            wanted = canonicalize_name(dist.metadata["Name"]) in closure
            files += [(f.parts, wanted) for f in dist.files or [] if f.parts[0] != ".."]
    link_files(site, dest, files)
    return dest


def test_the_wheel_alone_trains_cartpole_outside_the_repo_and_names_missing_extras(tmp_path):
    started = time.perf_counter()
    wheel, package_files = build_wheel(tmp_path)
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert "rlpipe/envs/envpool_ids.txt" in shipped  # package data ships
    assert set(package_files) <= shipped, sorted(set(package_files) - shipped)  # every module ships
    built = time.perf_counter()

    env_dir = tmp_path / "venv"
    venv.create(env_dir, symlinks=True)
    python, rlpipe = env_dir / "bin" / "python", env_dir / "bin" / "rlpipe"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path)
    core = core_site(wheel, tmp_path / "core-site")
    pth = Path(purelib.stdout.strip()) / "core_site.pth"
    pth.write_text(f"import site; site.addsitedir({str(core)!r})\n")
    # pip of this venv, run on the fresh one; with no index it installs the wheel alone or fails
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "-q",
            "--no-index",
            "--disable-pip-version-check",
            "-c",
            ROOT / "constraints.txt",
            wheel,
        ],
        tmp_path,
    )
    installed = time.perf_counter()

    probe = (
        f"import importlib.util as u, rlpipe; print(rlpipe.__file__); "
        f"print([m for m in {sorted(EXTRAS)!r} if u.find_spec(m)])"
    )
    where, extras = run([python, "-c", probe], tmp_path).stdout.splitlines()
    assert Path(where).is_relative_to(env_dir) and extras == "[]"  # the wheel's rlpipe, no extra installed

    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy2(ROOT / "params.yaml", outside / "params.yaml")
    run([rlpipe, "run", "params.yaml"], outside)
    metrics = json.loads((outside / "data" / "cartpole_ppo" / "metrics.json").read_text())
    assert metrics["stopped_by"].startswith("eval/return_mean >= 475") and metrics["eval/return_mean"] >= 475
    trained = time.perf_counter()

    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    for override, line in MISSING.items():
        result = run(
            [rlpipe, "run", "params.yaml", "--set", override, "--set", "trainer.exp_name=other"],
            outside,
            check=False,
        )
        last = result.stderr.strip().splitlines()[-1]
        assert (result.returncode, last) == (2, f"Error: {line}"), result.stderr
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before  # nothing written
    print(
        f"wheel {built - started:.0f} s, install {installed - built:.0f} s, "
        f"train {trained - installed:.0f} s, missing extras {time.perf_counter() - trained:.0f} s"
    )
