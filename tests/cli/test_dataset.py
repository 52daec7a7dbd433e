"""``rlpipe dataset``: bad input is one line naming the option or store, exit 2, and nothing written."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _dataset_runs import tiny_run
from click.testing import CliRunner

from rlpipe.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["dataset", *args])
    return result.exit_code, result.output.strip().splitlines()


def made_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--format", "rlds"],
            "Error: Invalid value for '--format': 'rlds' is not one of 'lerobot', 'minari'.",
        ),
        (["--iterations", "5:3"], "Error: Invalid value for '--iterations': '5:3': expected A:B with 1 <= A"),
        (["--iterations", "x"], "Error: Invalid value for '--iterations': 'x': expected A:B"),
        (["--last", "0"], "Error: Invalid value for '--last': 0 is not in the range x>=1."),
        (["--envs", "3:1"], "Error: Invalid value for '--envs': '3:1': expected env indices and ranges A:B"),
        (["--envs", "0,a"], "Error: Invalid value for '--envs': '0,a': expected env indices"),
        (["--action", "greedy"], "Error: Invalid value for '--action': 'greedy' is not one of 'executed'"),
        (["--images", "jpeg"], "Error: Invalid value for '--images': 'jpeg' is not one of 'video', 'png'."),
    ],
)
def test_a_malformed_option_is_named_and_exits_2(tmp_path, args, line):
    base = {"--format": "minari", "--out": str(tmp_path / "out")}
    for option, value in zip(args[::2], args[1::2], strict=True):
        base[option] = value
    code, lines = invoke(str(tmp_path / "run"), *[x for kv in base.items() for x in kv])
    assert code == 2 and lines[-1].startswith(line), lines
    assert made_in(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--iterations", "1:2", "--last", "1"], "Error: --iterations and --last: give one of them"),
        (["--min-return", "nan"], "Error: --min-return: nan is not a finite number"),
        (["--format", "minari", "--images", "png"], "Error: --images: not an option of --format minari"),
        (["--format", "minari", "--task", "push"], "Error: --task: not an option of --format minari"),
        (
            ["--format", "lerobot", "--dataset-id", "a/b-v0"],
            "Error: --dataset-id: not an option of --format lerobot",
        ),
        (
            ["--format", "minari", "--dataset-id", "rlpipe/x"],
            "Error: --dataset-id: 'rlpipe/x' is not a Minari dataset id; expected (namespace/)name-vN, e.g. "
            "rlpipe/cartpole/rollouts-v0",
        ),
    ],
)
def test_options_that_do_not_fit_are_one_line_and_exit_2(tmp_path, args, line):
    if "--format" not in args:
        args = ["--format", "minari", *args]
    code, lines = invoke(str(tmp_path / "run"), "--out", str(tmp_path / "out"), *args)
    assert (code, lines) == (2, [line])
    assert made_in(tmp_path) == []


def test_an_existing_out_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    code, lines = invoke(str(tmp_path / "run"), "--format", "minari", "--out", str(out))
    assert (code, lines) == (
        2,
        [f"Error: --out: {out} already exists; give a new folder (a dataset is written once)"],
    )
    assert made_in(tmp_path) == ["out"] and made_in(out) == ["mine.txt"]


def test_minari_without_its_extra_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "minari", None)
    code, lines = invoke(str(tmp_path / "run"), "--format", "minari", "--out", str(tmp_path / "out"))
    assert (code, lines) == (
        2,
        ["Error: rlpipe dataset --format minari needs minari: pip install 'rlpipe[minari]'"],
    )
    assert made_in(tmp_path) == []


def test_an_object_store_out_is_refused(tmp_path):
    code, lines = invoke(str(tmp_path / "run"), "--format", "minari", "--out", "s3://bucket/datasets/x")
    assert (code, lines) == (
        2,
        ["Error: --out: s3://bucket/datasets/x: a dataset is written to a local folder; copy it afterwards"],
    )


# --- bad input found in the run: one line naming the option or store, exit 2, no dataset folder -------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny stored runs: plain, without stores, with store.every gaps, kept last 2, an env without a rate."""
    base = tmp_path_factory.mktemp("runs")
    return {
        "plain": tiny_run(base / "plain"),
        "no_stores": tiny_run(base / "no_stores", "store.enabled=false"),
        "every": tiny_run(base / "every", "trainer.iterations=4", "store.every=2"),
        "keep_last": tiny_run(base / "keep_last", "store.keep_last=2"),
        "no_rate": tiny_run(base / "no_rate", "env.id=RepeatFirst", "trainer.iterations=2"),
    }


def refused(run: Path, out: Path, *args: str) -> str:
    code, lines = invoke(str(run), "--out", str(out), *args)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), lines
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]
    return lines[0]


def test_a_run_without_stores_is_refused(runs, tmp_path):
    line = refused(runs["no_stores"], tmp_path / "out", "--format", "minari")
    assert "rollouts" in line or "store" in line


def test_a_gap_from_store_every_is_refused_naming_the_store(runs, tmp_path):
    line = refused(runs["every"], tmp_path / "out", "--format", "minari")
    assert "iter-000003" in line or "3" in line.split("Error: ", 1)[1]


def test_kept_last_stores_export_from_the_oldest_kept_one_dropping_its_leading_fragment(runs, tmp_path):
    out = tmp_path / "out"
    code, lines = invoke(str(runs["keep_last"]), "--out", str(out), "--format", "minari")
    assert code == 0, lines
    fragments = int(re.search(r"(\d+) fragments dropped", lines[-1]).group(1))
    assert fragments >= 5  # per env: the one before store 2 (deleted store 1) and the one cut by store 3


@pytest.mark.parametrize(
    ("run", "span", "missing"),
    [
        (
            "keep_last",
            "1:3",
            "not stored: 1 (deleted by store.keep_last, skipped by store.every, or not run yet); stored: 2–3",
        ),
        ("keep_last", "2:5", "not stored: 4–5 ("),
        ("every", "2:4", "not stored: 3 ("),
    ],
)
def test_iterations_reaching_unstored_ones_are_refused_naming_them(runs, tmp_path, run, span, missing):
    line = refused(runs[run], tmp_path / "out", "--format", "minari", "--iterations", span)
    assert line.startswith(f"Error: --iterations {span}: {missing}"), line


def test_last_k_means_the_last_k_stored(runs, tmp_path):
    code, lines = invoke(
        str(runs["keep_last"]), "--out", str(tmp_path / "out"), "--format", "minari", "--last", "5"
    )
    assert code == 0, lines


def test_lerobot_refuses_an_env_without_a_control_rate(runs, tmp_path):
    line = refused(runs["no_rate"], tmp_path / "out", "--format", "lerobot")
    assert "RepeatFirst" in line and "control rate" in line


def test_a_selection_that_leaves_no_episode_says_what_was_dropped(runs, tmp_path):
    line = refused(runs["plain"], tmp_path / "out", "--format", "minari", "--min-return", "1e9")
    assert line.startswith("Error: the selection (--min-return 1e+09) holds no episode to export: ")
    assert "episodes filtered out" in line


def test_an_env_index_the_run_does_not_have_is_refused(runs, tmp_path):
    refused(runs["plain"], tmp_path / "out", "--format", "minari", "--envs", "7")


def test_a_huge_envs_range_is_refused_at_once_in_one_short_line_and_bounded_memory(runs, tmp_path):
    """A range is never expanded: checked against the run's 4 envs under a 4 GiB address-space cap."""
    script = (
        "import resource, sys; cap = 4 * 2**30; resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); "
        "from rlpipe.cli import main; main()"
    )
    out = tmp_path / "out"
    args = [
        "dataset",
        str(runs["plain"]),
        "--format",
        "minari",
        "--out",
        str(out),
        "--envs",
        "0:100000000000",
    ]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert time.monotonic() - started < 60  # the imports, then a refusal: no expansion of the range
    assert (result.returncode, result.stderr.strip().splitlines()) == (
        2,
        ["Error: --envs 0:100000000000: the stores hold envs 0–3 of each rank"],
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "accepted"),
    [
        (
            "--envs",
            "expected env indices and ranges A:B (both included, 0 <= A <= B), comma-separated, e.g. 0,2,5:7",
        ),
        ("--iterations", "expected A:B with 1 <= A <= B (both included) or one iteration K, e.g. 3:7"),
    ],
)
def test_a_long_malformed_value_is_quoted_shortened(tmp_path, option, accepted):
    out = str(tmp_path / "out")
    code, lines = invoke(str(tmp_path / "run"), "--format", "minari", "--out", out, option, "1,x" * 5000)
    assert code == 2 and len(lines[-1]) < 400, lines
    assert lines[-1].startswith(f"Error: Invalid value for '{option}': '1,x1,x")
    assert "characters left out" in lines[-1] and lines[-1].endswith(accepted)


def test_a_kept_selection_writes_the_dataset_and_its_summary(runs, tmp_path):
    out = tmp_path / "sub" / "minari"
    code, lines = invoke(
        str(runs["plain"]),
        "--format",
        "minari",
        "--out",
        str(out),
        "--last",
        "2",
        "--dataset-id",
        "me/cartpole-v3",
    )
    assert code == 0, lines
    assert re.fullmatch(
        rf"dataset → {re.escape(str(out))}: \d+ episodes, \d+ frames, \d+ fragments dropped, "
        r"0 episodes filtered out, \d+\.\d MB, \d+\.\d s",
        lines[-1],
    ), lines
    assert (out / "me" / "cartpole-v3" / "data" / "main_data.hdf5").is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["minari"]  # published, no temporary left


def test_a_relative_out_is_written_where_it_names(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, lines = invoke(str(runs["plain"]), "--format", "minari", "--out", "datasets/cartpole-minari")
    assert code == 0, lines
    dataset = tmp_path / "datasets/cartpole-minari/rlpipe/cartpole_ppo/rollouts-v0"
    assert (dataset / "data/main_data.hdf5").is_file()
    assert made_in(tmp_path / "datasets") == ["cartpole-minari"]
