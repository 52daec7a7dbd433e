"""The commands of README.md and the docs pages, in order, with the test's explicit rewrite and skip tables.

``doc_commands()`` reads README.md, then every page of the docs site in the order of ``mkdocs.yml``'s
nav (then any page the nav leaves out), so a later page may use what an earlier one made (the run of
``make run``, the ``clip01`` run). In each it reads every fenced block that holds shell commands
(```bash, ```sh, ```console or an unlabelled block; never ```python/```yaml/```toml/```text) and
returns each command line a reader would type: continuation lines joined, the trailing ``# comment``
removed (it is kept as ``note``), a ``$ `` prompt removed. A command is a line whose program (after
``VAR=value`` assignments) is one of :data:`PROGRAMS`. What a page says a command prints is kept too:
a ``# … (exit N)`` note gives the expected exit code, and an ``Error: …`` line after a ``$ `` command
the expected stderr line.

:data:`REWRITES` shortens long commands (each entry must match a README command: a stale entry fails
the test); :data:`SKIPS` names every command that cannot run in the test and why (a GPU, a server,
more than one machine, or the test suite itself).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"

PROGRAMS = ("rlpipe", "python", "dvc", "torchrun", "mlflow", "make", "source", "ls", ".venv/bin/python")
"""First words that make a code-block line a command."""
SHELL_BLOCKS = ("", "bash", "sh", "shell", "console")
"""Fence labels of blocks that hold commands (an unlabelled block may hold a ``$ `` session)."""

REWRITES: tuple[tuple[str, str, str], ...] = (
    # (regex on the command, replacement, why)
    (
        r"^make run$",
        "rlpipe run params.yaml --overwrite",
        "make run's recipe; its install step would re-point the shared venv at the copy",
    ),
    (r"^make repro$", 'PATH="$PWD/.venv/bin:$PATH" dvc repro', "make repro's recipe (same reason)"),
    (r"^make exps$", "make -o .venv/.rlpipe-installed exps", "make exps without its install step"),
    (
        r"^(rlpipe run params\.yaml --set \S+ --set trainer\.exp_name=(clip01|wide))$",
        r"\1 --set trainer.iterations=2",
        "solved in about 15 iterations → 2",
    ),
    (r"^(python examples/\w+\.py --iterations) \d+$", r"\1 2", "2 iterations per example"),
    (
        r"^torchrun --nproc_per_node 4 (.*)$",
        r"torchrun --nproc_per_node 2 \1 --set trainer.iterations=2",
        "2 processes (2 cores) for 2 iterations",
    ),
    (
        r"^((?:MUJOCO_GL=egl )?rlpipe run configs/push_cube\.yaml)$",
        r"\1 --set trainer.iterations=2 --set trainer.num_envs=8 --set trainer.num_eval_envs=2",
        "2.05M env steps → 2 iterations of 8 envs",
    ),
    (
        r"^(rlpipe run configs/push_cube_teacher\.yaml)$",
        r"\1 --set trainer.iterations=2 --set trainer.num_envs=8 --set trainer.num_eval_envs=2",
        "3.07M env steps → 2 iterations of 8 envs",
    ),
    (
        r"^(MUJOCO_GL=egl rlpipe run configs/push_cube_camera_student\.yaml)$",
        r"\1 --set trainer.iterations=2 --set trainer.num_envs=4 --set trainer.num_eval_envs=2 "
        r"--set eval.num_envs=2 --set eval.num_episodes=1",
        "640k env steps → 2 iterations of 4 envs",
    ),
    (
        r"^(MUJOCO_GL=egl rlpipe run configs/push_cube_teacher\.yaml --set store\.enabled=true .*)$",
        r"\1 --set trainer.iterations=2 --set trainer.num_envs=8 --set trainer.num_eval_envs=2",
        "3.07M env steps → 2 iterations of 8 envs",
    ),
    (
        r"^(rlpipe dataset data/push_cube_teacher_camera .*) --last 20 --min-success (.*)$",
        r"\1 \2",
        "2 iterations of an untrained teacher: every episode, none has succeeded yet",
    ),
    (
        r"^(rlpipe eval configs/push_cube\.yaml)$",
        r"\1 --set eval.num_envs=2 --set eval.num_episodes=1",
        "256 episodes → 2",
    ),
    (
        r"^(rlpipe run configs/go1_envpool\.yaml)$",
        r"\1 --set trainer.iterations=1 --set trainer.num_envs=8 --set trainer.num_eval_envs=2",
        "a long locomotion run → 1 iteration of 8 envs",
    ),
    (
        r"^(python benchmarks/peers/sb3_halfcheetah\.py --side rlpipe .*)$",
        r"\1 --steps 1024 --eval-episodes 2",
        "1M env steps → 1,024",
    ),
    (
        r"^(rlpipe run configs/ppo_halfcheetah_envpool\.yaml)$",
        r"\1 --set trainer.iterations=1 --set trainer.num_envs=4 --set trainer.num_eval_envs=2",
        "1M env steps → 1 iteration of 4 envs",
    ),
    (
        r"^(rlpipe run configs/zoo/(?:sac|td3)_\w+\.yaml)$",
        r"\1 --set trainer.iterations=1 --set trainer.num_envs=4 --set trainer.num_eval_envs=2",
        "1M env steps → 1 iteration of 4 envs",
    ),
    (
        r"^(rlpipe run configs/sac_pendulum\.yaml)$",
        r"\1 --set trainer.iterations=4",
        "32k env steps → 4 iterations, the last two with gradient steps",
    ),
    (
        r"^(python benchmarks/learning/offpolicy_mujoco\.py) .*$",
        r"\1 --seeds 0 --steps 1024 --set algorithm.cfg.learning_starts=512 "
        r"--set algorithm.cfg.random_steps=512",
        "hours of SAC on a CPU, and SB3's own virtualenv → one seed of 1,024 env steps, no SB3",
    ),
    (
        r"^(rlpipe run configs/grpo_cartpole\.yaml)$",
        r"\1 --set trainer.iterations=1 --set trainer.num_envs=8",
        "GRPO from scratch → 1 iteration of 8 envs",
    ),
    (
        r"--engines mujoco warp$",
        "--engines mujoco --envs 16 --steps 5 --repeats 1",
        "MuJoCo Warp on CPU compiles its kernels for minutes; one small mujoco timing",
    ),
    (
        r"^(python benchmarks/speed/startup\.py) --repeats 3",
        r"\1 --repeats 1 --skip-solve",
        "one short repeat",
    ),
    (
        r"^(\.venv/bin/python benchmarks/peers/throughput\.py --guards)$",
        r"\1 --warmup 1 --iterations 1",
        "one timed iteration per side",
    ),
    (
        r"^(\.venv/bin/python benchmarks/speed/store_write\.py)$",
        r"\1 --num-envs 64 --repeats 1",
        "a small store",
    ),
    (
        r"^(\.venv/bin/python benchmarks/peers/gpu_vs_rsl_rl\.py) --device (?:cuda --json \S+|cpu "
        r"--num-envs 64 --rounds 2 (--json \S+))$",
        r"\1 --device cpu --num-envs 8 --horizon 4 --rounds 1 \2",
        "no GPU here: 8 envs on the CPU, one round (the GPU command writes no results file)",
    ),
    (
        r"^(rlpipe run params\.yaml --set algorithm\.cfg\.amp=auto .*)$",
        r"\1 --set trainer.iterations=1",
        "1 iteration",
    ),
    (
        r"^(dvc exp run --queue -n clip0[13] -S algorithm\.cfg\.clip_coef=0\.[13])$",
        r"\1 -S trainer.iterations=2",
        "2 iterations per experiment",
    ),
)

SKIPS: tuple[tuple[str, str], ...] = (
    # (regex on the command, why it cannot run here)
    (r"^make test$", "the whole test suite (this test is part of it)"),
    (r"^\.venv/bin/python -m pytest tests/faults", "the test suite runs these itself"),
    (r"--nnodes 2", "needs two machines"),
    (r"^MLFLOW_TRACKING_URI=http://", "needs an MLflow server"),
    (r"^mlflow (ui|server)\b", "starts a server that runs until stopped"),
    (
        r"s3://|^export AWS_",
        "needs an S3 object store (tests/trainer/test_object_store_run.py, "
        "tests/dvc/test_remote.py and test_object_store_nodes.py run them against moto)",
    ),
    (r"\[--|\bDIR\b|\bFILE\b|\bckpt\.pt\b|\bROLLOUT\b", "a usage synopsis with placeholders"),
    (
        r"\.venv-mjlab|^make test-mjlab$",
        "a second virtualenv with mjlab (minutes of installing; make test-mjlab builds one and runs "
        "the training commands of docs/mjlab.md in it)",
    ),
    (
        r"isaaclab|^rlpipe run cartpole\.yaml$",
        "needs Isaac Lab 3.0 in its own Python 3.12 virtualenv (make test-isaaclab builds one and runs "
        "these training commands of docs/isaaclab.md in it)",
    ),
    (r"/path/to/", "a placeholder path (a separate SB3 virtualenv, benchmarks/README.md)"),
    (r"^python benchmarks/peers/sb3_compare\.py", "needs SB3's own virtualenv (make -C benchmarks sb3-venv)"),
    (
        r"^dvc (remote modify s3store|push|pull)\b|^dvc add .* -o models/|^mkdir -p models$",
        "the S3 DVC remote of the line before (tests/dvc/test_remote.py runs these against moto)",
    ),
)

PLACEHOLDERS = {"<exp>": "cartpole_ppo"}
"""Placeholders of runnable lines, filled with the run ``make run`` made."""


@dataclass(frozen=True)
class Command:
    """One documented command: the text as written, its comment, the expected exit code and stderr line.

    ``source`` is the file it was read from (relative to the repository), ``line`` its line there.
    """

    line: int
    text: str
    note: str = ""
    exit_code: int = 0
    error: str | None = None
    source: str = "README.md"

    @property
    def assignments(self) -> dict[str, str]:
        """The ``VAR=value`` assignments before the command (``PYTHONPATH=examples/plugins``)."""
        out: dict[str, str] = {}
        for word in shlex.split(self.text):
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", word):
                break
            name, value = word.split("=", 1)
            out[name] = value
        return out

    @property
    def words(self) -> list[str]:
        """The command's words (shell quoting removed); ``VAR=value`` assignments dropped."""
        words = shlex.split(self.text)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words.pop(0)
        return words


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """``(first line number, lines)`` of every fenced block whose label is in :data:`SHELL_BLOCKS`."""
    blocks, current, label, start = [], None, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(\S*)", line)
        if fence and current is None:
            current, label, start = [], fence.group(1), number + 1
        elif fence:
            if label in SHELL_BLOCKS:
                blocks.append((start, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def split_comment(line: str) -> tuple[str, str]:
    """``(command, comment)``: the first ``#`` outside quotes that starts a word begins the comment."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _is_command(text: str) -> bool:
    words = [w for w in text.split() if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w)]
    return bool(words) and words[0] in PROGRAMS


class _NavLoader(yaml.SafeLoader):
    """``mkdocs.yml`` with any ``!!python/…`` tag read as null (only the nav is wanted here)."""


_NavLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _nav_files(nav: object) -> list[str]:
    """The page files of an mkdocs nav, depth first, in order."""
    if isinstance(nav, str):
        return [nav] if nav.endswith(".md") else []
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    return []


def doc_pages() -> list[Path]:
    """README.md, then the docs pages in nav order, then the pages the nav leaves out (by name)."""
    config = yaml.load(MKDOCS.read_text(), Loader=_NavLoader)
    pages = [DOCS / name for name in _nav_files(config.get("nav", []))]
    pages = [p for p in dict.fromkeys(pages) if p.is_file()]
    rest = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
    return [README, *pages, *(p for p in rest if p not in pages)]


def doc_commands(text: str | None = None, source: str = "README.md") -> list[Command]:
    """Every command of the shell blocks of README.md and the docs pages (:func:`doc_pages`), in order.

    With ``text``, the commands of that text alone (named ``source``).
    """
    if text is None:
        return [
            c for page in doc_pages() for c in doc_commands(page.read_text(), str(page.relative_to(ROOT)))
        ]
    commands: list[Command] = []
    for start, lines in _blocks(text):
        i = 0
        while i < len(lines):
            number, raw = start + i, lines[i]
            while raw.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                raw = raw.rstrip()[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            prompt = raw.lstrip().startswith("$ ")
            body, note = split_comment(raw.lstrip().removeprefix("$ "))
            if not _is_command(body):
                continue
            error = None
            if prompt and i < len(lines) and lines[i].startswith("Error: "):
                error = lines[i]
            code = re.search(r"\bexit (\d+)\b", note)
            exit_code = int(code.group(1)) if code else (2 if error or note.startswith("Error:") else 0)
            commands.append(Command(number, body, note, exit_code, error, source))
    return commands


def skip_reason(command: Command) -> str | None:
    """Why ``command`` is not run (:data:`SKIPS`), or ``None``."""
    return next((why for pattern, why in SKIPS if re.search(pattern, command.text)), None)


def runnable(command: Command) -> str:
    """The command as the test runs it: :data:`REWRITES` applied, placeholders filled."""
    text = command.text
    for pattern, replacement, _ in REWRITES:
        text = re.sub(pattern, replacement, text)
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text


def synopsis_words(command: Command) -> list[str]:
    """The words of a usage synopsis with ``[``, ``]`` and ``|`` removed (for option checks)."""
    words = shlex.split(command.text.replace("[", " ").replace("]", " ").replace(" | ", " "))
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words.pop(0)
    return words
