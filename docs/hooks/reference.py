"""mkdocs hook: the API reference, one page per top-level module or package of ``rlpipe``.

The pages are generated from the source tree at build time, so the reference follows the layout:
a package that appears gets a page, one that goes away loses it. Each page is a single mkdocstrings
block (``::: rlpipe.envs``) that renders the package and its submodules from their docstrings.
The overview page lists every page with the first line of its module docstring, and Sphinx roles in
the docstrings (``:class:`Trainer```, ``:func:`~rlpipe.rollout_checks.validate```) read as inline code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ORDER = (
    "trainer",
    "collector",
    "algorithms",
    "policies",
    "envs",
    "rollout",
    "config",
    "artifacts",
    "offline",
    "evaluation",
    "tracking",
    "runtime",
    "dvc",
    "fast",
    "cli",
)
"""Pages in reading order: the loop and its parts first, the plumbing last; others follow by name."""
LEFT_OUT = {"__main__", "version", "testing", "run", "learner"}
"""Not documented: the entry point, the version string, the fault-injection hooks of tests/faults,
and the online driver's former modules (``rlpipe.run``, ``rlpipe.learner``) while they are folded
into ``rlpipe.trainer`` and ``rlpipe.collector``."""
SECTION = "API reference"


def package_root(config: MkDocsConfig) -> Path:
    """The ``rlpipe`` source folder beside ``mkdocs.yml``."""
    return Path(config.config_file_path).parent / "rlpipe"


def documented(root: Path) -> list[str]:
    """Top-level module and package names of ``root`` that get a page, in :data:`ORDER`."""
    names = {p.stem for p in root.glob("*.py")} | {
        p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.py"))
    }
    names = {n for n in names if not n.startswith("_") and n not in LEFT_OUT}
    ranked = [n for n in ORDER if n in names]
    return ranked + sorted(names - set(ranked))


def summary(root: Path, name: str) -> str:
    """The first line of the module docstring of ``rlpipe.<name>`` (empty when it has none)."""
    path = root / f"{name}.py"
    if not path.is_file():
        path = root / name / "__init__.py"
    if not path.is_file():
        return ""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    return doc.strip().splitlines()[0] if doc else ""


ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([^`]+)`")
"""A Sphinx cross-reference role; ``~`` shows the last dotted component only."""


class SphinxRoles(Extension):
    """Markdown extension: ``:class:`X``` → ``X`` as inline code (docstrings are written for both)."""

    def extendMarkdown(self, md: Markdown) -> None:
        """Register the preprocessor before the fenced-code one."""
        md.preprocessors.register(_RolesToCode(md), "sphinx_roles", 40)


class _RolesToCode(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        return [ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", line) for line in lines]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append the reference section to the nav (once: ``mkdocs serve`` reloads the config per build).

    Also add :class:`SphinxRoles` to the Markdown extensions, which mkdocstrings renders docstrings with.
    """
    names = documented(package_root(config))
    nav = [entry for entry in config.nav if not (isinstance(entry, dict) and SECTION in entry)]
    pages = ["reference/index.md", *({f"rlpipe.{n}": f"reference/rlpipe.{n}.md"} for n in names)]
    config.nav = [*nav, {SECTION: pages}]
    if not any(isinstance(ext, SphinxRoles) for ext in config.markdown_extensions):
        config.markdown_extensions.append(SphinxRoles())
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages: the overview and one page per documented module or package."""
    root = package_root(config)
    names = documented(root)
    rows = "\n".join(f"| [`rlpipe.{n}`](rlpipe.{n}.md) | {summary(root, n)} |" for n in names)
    index = (
        f"# {SECTION}\n\nGenerated from the docstrings of the source tree at build time: one page per "
        "module or package of `rlpipe`, each with its submodules.\n\n"
        f"| module | what it is |\n|---|---|\n{rows}\n\n"
        "::: rlpipe\n    options:\n      show_submodules: false\n      show_root_heading: false\n"
    )
    files.append(File.generated(config, "reference/index.md", content=index))
    for name in names:
        files.append(File.generated(config, f"reference/rlpipe.{name}.md", content=f"::: rlpipe.{name}\n"))
    return files
