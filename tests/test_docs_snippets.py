"""The README and docs/ show code that works.

Every fenced ``python`` block of ``README.md`` and ``docs/*.md`` runs as written, each in a
fresh namespace and a temporary working directory, offline (no API key, no network: the
framework snippets use each framework's own offline fake model). ``bash`` blocks are not run;
every ``pip install -e ".[X]"`` / ``flexamem[X]`` extra they name must exist in
``pyproject.toml`` and every ``flexamem SUBCOMMAND`` must be a command of the ``flexamem`` CLI.
``yaml`` blocks must parse. Links from the README into ``docs/`` (and between the docs) must
resolve, and the README stays a user's page: short, with no per-change history.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import re
import socket
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOC_FILES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: Keys a snippet must never need: they are removed while a block runs.
API_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY",
            "COHERE_API_KEY", "GROQ_API_KEY", "OPENROUTER_API_KEY")

FENCE = re.compile(r"^( {0,3})(`{3,})\s*([\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the first code line
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, lang = len(opening.group(1)), opening.group(2), opening.group(3).lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = FENCE.match(lines[j])
            if closing and closing.group(2) == ticks and not closing.group(3):
                break
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        else:
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: unclosed code fence")
        found.append(Block(path, i + 2, lang, "\n".join(body) + "\n"))
        i = j + 1
    return found


ALL_BLOCKS = [b for path in DOC_FILES for b in blocks(path)]
PYTHON = [b for b in ALL_BLOCKS if b.lang in ("python", "py")]
BASH = [b for b in ALL_BLOCKS if b.lang in ("bash", "sh", "shell", "console")]
YAML = [b for b in ALL_BLOCKS if b.lang in ("yaml", "yml")]


def test_docs_exist_and_have_code():
    names = {p.name for p in DOC_FILES}
    for name in ("api.md", "design.md", "strategies.md", "stores.md", "adapters.md", "evaluation.md",
                 "benchmarks.md"):
        assert name in names, f"docs/{name} is missing"
    assert not (ROOT / "docs" / "CORE_API.md").exists(), "docs/CORE_API.md was replaced by docs/api.md"
    assert PYTHON and BASH


def _offline(connect):
    """``socket.connect`` refusing every address but loopback and local sockets."""

    def guarded(sock, address, *args):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"a documentation snippet tried to reach the network: {address!r}")
        return connect(sock, address, *args)

    return guarded


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block_runs(block: Block, tmp_path, monkeypatch):
    """The block runs as written, in a fresh namespace, in an empty working directory, with no
    API key and no network."""
    monkeypatch.chdir(tmp_path)
    for key in API_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(socket.socket, "connect", _offline(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _offline(socket.socket.connect_ex))
    # Padded so a traceback names the line of the Markdown file; no __future__ flag of this module.
    code = compile("\n" * (block.line - 1) + block.text, str(block.path), "exec", dont_inherit=True)
    module = types.ModuleType("docs_snippet")  # a real module, as a user's script would be
    module.__file__ = str(tmp_path / "snippet.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(code, module.__dict__)


def _extras() -> set[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return set(tomllib.load(fh)["project"]["optional-dependencies"])


EXTRA = re.compile(r"""(?:(?<![\w/])\.|\bflexamem)\[([A-Za-z0-9_,\s-]+)\]""")
SUBCOMMAND = re.compile(r"(?:^|&&|\|\||[;|(])\s*flexamem\s+([A-Za-z][\w-]*)")


def _commands(block: Block) -> list[str]:
    """The shell lines of a block, comments cut and continuation lines joined."""
    joined = re.sub(r"\\\n", " ", block.text)
    return [line.split(" #", 1)[0] for line in joined.splitlines() if not line.lstrip().startswith("#")]


@pytest.mark.parametrize("block", BASH, ids=[b.where for b in BASH])
def test_bash_block_names_real_extras_and_commands(block: Block):
    from flexamem_tools.cli import commands

    extras, subcommands = _extras(), set(commands())
    for line in block.text.splitlines():  # comments too: an extra named anywhere must exist
        if "pip install" in line or "flexamem[" in line:
            for group in EXTRA.findall(line):
                for extra in filter(None, (e.strip() for e in group.split(","))):
                    assert extra in extras, f"{block.where}: no extra {extra!r} in pyproject.toml ({line.strip()})"
    for line in _commands(block):
        for name in SUBCOMMAND.findall(line):
            assert name in subcommands, f"{block.where}: 'flexamem {name}' is not a command ({sorted(subcommands)})"


@pytest.mark.parametrize("block", YAML, ids=[b.where for b in YAML])
def test_yaml_block_parses(block: Block):
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(block.text) is not None


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def test_links_into_docs_resolve():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"\bdocs/[\w.-]+\.md\b", text))
    assert named, "the README links no page of docs/"
    for target in sorted(named):
        assert (ROOT / target).is_file(), f"README.md names {target}, which does not exist"
    for path in DOC_FILES:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links {target}, which does not exist"


HISTORY = re.compile(r"\b(?:stop|issue)\s+\d+\b", re.IGNORECASE)


def test_readme_is_for_users():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; move detail into docs/"
    for path in DOC_FILES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not HISTORY.search(line), f"{path.relative_to(ROOT)}:{n}: per-change history belongs in git log"
