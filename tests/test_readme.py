"""The documented commands (README.md, the docs pages): each parses (fast), and all run in order (slow).

The slow test copies the working tree (tracked and untracked, not ignored files) into a temporary
git repository, shares this interpreter's virtualenv, and runs every command of README.md and of the
docs pages in the nav's order, ``make run``'s recipe first (tests/_readme.py: the order, what is
shortened and what is skipped, each with its reason).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from _readme import (
    DOCS,
    README,
    REWRITES,
    ROOT,
    SKIPS,
    Command,
    doc_commands,
    doc_pages,
    runnable,
    skip_reason,
    synopsis_words,
)

COMMANDS = doc_commands()
WRITTEN = {name for c in COMMANDS for name in re.findall(r">\s*(\S+\.(?:yaml|json))\b", c.text)}
"""Params files an earlier documented command writes (``--print-params > cartpole.yaml``)."""


# --- extraction ---------------------------------------------------------------------------------------

SAMPLE = """
```bash
rlpipe run params.yaml --set a.b=1 \\
  --set 'c=[1,2]'      # a comment with (exit 3)
# a comment line
echo not a command
```
```python
rlpipe = 1
```
```
$ rlpipe run params.yaml --set trainer.num_envs=0
Error: params.yaml: trainer.num_envs: bad
```
"""


def test_extraction_joins_lines_strips_comments_and_reads_expected_errors():
    first, second = doc_commands(SAMPLE, "docs/sample.md")
    assert first.source == second.source == "docs/sample.md"
    assert first.text == "rlpipe run params.yaml --set a.b=1 --set 'c=[1,2]'"
    assert first.words[-1] == "c=[1,2]" and first.exit_code == 3 and first.line == 3
    assert second.text == "rlpipe run params.yaml --set trainer.num_envs=0"
    assert second.error == "Error: params.yaml: trainer.num_envs: bad" and second.exit_code == 2


def test_every_rewrite_and_skip_matches_a_documented_command():
    texts = [c.text for c in COMMANDS]
    stale = [p for p, *_ in (*REWRITES, *SKIPS) if not any(re.search(p, t) for t in texts)]
    assert not stale, f"entries of tests/_readme.py that match no documented command: {stale}"
    assert len(COMMANDS) > 50


def test_commands_come_from_the_readme_then_every_docs_page_in_nav_order():
    pages = doc_pages()
    every_page = {p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts}
    assert pages[0] == README and set(pages[1:]) == every_page and len(pages) == len(set(pages))
    assert pages[1] == DOCS / "index.md"  # the nav's first page
    sources = list(dict.fromkeys(c.source for c in COMMANDS))
    assert sources[0] == "README.md" and sources == sorted(sources, key=lambda s: pages.index(ROOT / s))
    assert {"docs/getting-started.md", "docs/offline.md", "docs/tracking-dvc.md"} <= set(sources)
    assert COMMANDS[0].text == "make run"  # the run every later command may read


# --- every command parses (default suite) --------------------------------------------------------------


def _parse_rlpipe(args: list[str], synopsis: bool, exit_code: int = 0) -> None:
    """Parse ``rlpipe ARGS`` as click would, without running the command (synopsis: options only)."""
    from rlpipe.cli import cli

    try:
        group_ctx = cli.make_context("rlpipe", list(args), resilient_parsing=synopsis)
    except click.exceptions.Exit as exc:  # rlpipe --help
        assert exc.exit_code == 0
        return
    rest = [*group_ctx._protected_args, *group_ctx.args]
    if not rest:
        return
    name, command, rest = cli.resolve_command(group_ctx, rest)
    assert command is not None, f"rlpipe has no command {rest[0]!r}"
    if synopsis:
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        unknown = [w for w in rest if w.startswith("--") and w not in known]
        assert not unknown, f"rlpipe {name} has no option {unknown}"
        return
    try:
        command.make_context(name, list(rest), parent=group_ctx)  # click consumes the list
    except click.exceptions.Exit as exc:  # --help
        assert exc.exit_code == 0
    params = rest[0] if rest else ""
    if params.endswith((".yaml", ".json")) and not params.startswith("data/") and params not in WRITTEN:
        assert (ROOT / params).is_file(), f"{params}: no such params file"
    if name == "run" and (ROOT / params).is_file():  # the params and every --set key exist
        from rlpipe.config import ConfigError, load

        sets = [rest[i + 1] for i, w in enumerate(rest[:-1]) if w == "--set"]
        try:
            load(ROOT / params, sets)
        except ConfigError:
            assert exit_code != 0, "a params error where the README expects none"


def _check_python(words: list[str]) -> None:
    if words[1] == "-c":
        compile(words[2], "<readme>", "exec")
        return
    if words[1] == "-m":
        if words[2] == "rlpipe":
            _parse_rlpipe(words[3:], synopsis=False)
        else:
            assert importlib.util.find_spec(words[2]) is not None, words[2]
            assert all((ROOT / w).exists() for w in words[3:] if w.startswith("tests/")), words
        return
    script = ROOT / words[1]
    assert script.is_file(), f"{words[1]}: no such file"
    source = script.read_text()
    for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
        assert f'"{option}"' in source, f"{words[1]} has no option {option}"


def _check_command(command: Command) -> None:
    synopsis = skip_reason(command) == "a usage synopsis with placeholders"
    words = synopsis_words(command) if synopsis else command.words
    words = words[: words.index("|")] if "|" in words else words  # a pipe: the README's command is first
    program = words[0]
    if program == "rlpipe":
        _parse_rlpipe(words[1:], synopsis, command.exit_code)
    elif program in ("python", ".venv/bin/python"):
        _check_python(words)
    elif program == "torchrun":
        _parse_rlpipe(words[words.index("rlpipe") + 1 :], False, command.exit_code)
    elif program == "dvc":
        from dvc.cli import parse_args

        parse_args(words[1:])
    elif program == "make":
        assert re.search(rf"^{words[1]}:", (ROOT / "Makefile").read_text(), re.M), words
    elif program == "mlflow":
        package = Path(importlib.util.find_spec("mlflow").origin).parent
        source = "".join((package / f).read_text() for f in ("cli/__init__.py", "utils/cli_args.py"))
        assert all(f'"{w}"' in source for w in words[2:] if w.startswith("--")), words
    else:
        assert program in ("ls", "source"), program


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.source}:L{c.line}" for c in COMMANDS])
def test_documented_command_parses(command: Command):
    """The command, its options and (for ``rlpipe run FILE``) every ``--set`` key exist."""
    folders = [str(ROOT / p) for p in command.assignments.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = folders  # the command's PYTHONPATH, as its shell would set it
    try:
        _check_command(command)
    except click.ClickException as exc:
        pytest.fail(f"{command.source} line {command.line}: {command.text}\n  {exc.format_message()}")
    except SystemExit as exc:  # argparse (dvc)
        pytest.fail(f"{command.source} line {command.line}: {command.text}\n  exits {exc.code}")
    finally:
        del sys.path[: len(folders)]


# --- every command runs, in order, on a fresh copy (slow) --------------------------------------------


def fresh_copy(dest: Path) -> Path:
    """The working tree's files (tracked + untracked, not ignored) in a new git repo sharing the venv."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    (dest / ".venv").symlink_to(Path(sys.prefix))
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fresh clone"],
    ):
        subprocess.run(["git", *args], cwd=dest, check=True)
    return dest


def shows_error(expected: str, stderr: str) -> bool:
    """Whether a line of ``stderr`` is the README's ``Error: …`` line (``…`` stands for any text)."""
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return any(re.fullmatch(pattern, line) for line in stderr.splitlines())


def test_shows_error_reads_the_ellipsis_as_any_text():
    assert shows_error("Error: a: b …", "warning\nError: a: b c d\n")
    assert not shows_error("Error: a: b …", "Error: a: c\n")


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
def test_documented_commands_run_in_order_on_a_fresh_copy(tmp_path):
    repo = fresh_copy(tmp_path / "repo")
    env = {
        **os.environ,
        "PATH": f"{repo / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(repo),
        "MUJOCO_GL": "egl",
        "HOME": str(tmp_path),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }  # a shared machine: no spinning
    env.pop("MLFLOW_TRACKING_URI", None)
    git_user = "[user]\n\tname = readme\n\temail = readme@example.com\n"
    (tmp_path / ".gitconfig").write_text(git_user)  # a user's own git identity (dvc exp apply commits)
    failures, log = [], []
    for command in COMMANDS:
        reason = skip_reason(command)
        if reason:
            log.append(f"skip {command.source}:L{command.line} ({reason}): {command.text}")
            continue
        text = runnable(command)
        result = subprocess.run(
            ["bash", "-c", text], cwd=repo, env=env, capture_output=True, text=True, timeout=900
        )
        ok = result.returncode == command.exit_code and (
            command.error is None or shows_error(command.error, result.stderr)
        )
        where = f"{command.source}:L{command.line}"
        log.append(f"{'ok  ' if ok else 'FAIL'} {where} exit {result.returncode}: {text}")
        if not ok:
            expected = f"{command.exit_code}{', ' + repr(command.error) if command.error else ''}"
            failures.append(
                f"{where}: {shlex.quote(text)} exited {result.returncode} "
                f"(expected {expected})\n{(result.stdout + result.stderr)[-1500:]}"
            )
    print("\n".join(log))
    assert not failures, "\n\n".join(failures)
