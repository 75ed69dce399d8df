"""MkDocs hooks: the site's pages as the repository holds them, and the parts made from the code.

- Repository files outside docs/ (the README, benchmarks/README.md...) are pages of the site, and
  every file a page links to (an image, LICENSE) is copied along at its repository path.
- Links are written as the repository lays files out (so that they work where the Markdown is
  read in place); here they are rewritten to the site's pages.
- ``<!-- generated: NAME -->`` is replaced by a reference made from the code at build time:
  the command line (argparse), the exit codes (errors.py), the filters and presets.
- ``::: streamconv.NAME`` (mkdocstrings) documents a public name where it is defined, found in
  the package's table of lazy names, so that the page keeps to the public names.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
from pathlib import Path

from cli_reference import cli_reference
from exit_codes import exit_code_table
from filter_table import filter_table, preset_table
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]

REPO_PAGES = {"README.md": "index.md", "examples/README.md": "examples.md",
              "benchmarks/README.md": "benchmarks.md", "CHANGELOG.md": "changelog.md"}
"""Repository files outside docs/ that are pages of the site: repository path -> page."""

GENERATED = {"cli-reference": cli_reference, "exit-codes": exit_code_table,
             "filters": filter_table, "presets": preset_table}
PLACEHOLDER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)
LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
API_NAME = re.compile(r"^::: streamconv\.(\w+)$", re.MULTILINE)
TABLE_ROW = re.compile(r"^\|.*\|$", re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`]+`")


def public_names() -> dict[str, str]:
    """streamconv's public name -> the module that defines it (its ``_EXPORTS`` table)."""
    tree = ast.parse((REPO / "streamconv" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("streamconv/__init__.py has no _EXPORTS table")


def _repo_path(page_uri: str) -> str:
    """The repository path of a page of the site."""
    for repo_path, page in REPO_PAGES.items():
        if page == page_uri:
            return repo_path
    return f"docs/{page_uri}"


def _site_path(repo_path: str) -> str:
    """Where a repository file is in the site."""
    if repo_path in REPO_PAGES:
        return REPO_PAGES[repo_path]
    return repo_path.removeprefix("docs/")


def _linked_files(markdown: str, repo_path: str) -> set[str]:
    """Repository paths of the local files a page links to."""
    found = set()
    for _, target in LINK.findall(FENCE.sub("", markdown)):
        path = target.split("#")[0]
        if path and "://" not in path and not path.startswith(("/", "mailto:")):
            found.add(posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path)))
    return found


def on_config(config):
    """Import the checkout's streamconv in the generators (MkDocs restores sys.path after
    loading a hook, so it is set here)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return config


def on_files(files: Files, config) -> Files:
    """Add the repository's pages, and the files pages link to outside docs/."""
    sources = {repo_path: (REPO / repo_path).read_text(encoding="utf-8") for repo_path in REPO_PAGES}
    for page in (REPO / "docs").glob("*.md"):
        sources[f"docs/{page.name}"] = page.read_text(encoding="utf-8")
    for repo_path, page in REPO_PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(REPO / repo_path)))
    linked = set().union(*(_linked_files(text, path) for path, text in sources.items()))
    for repo_path in sorted(linked - set(REPO_PAGES)):
        if not repo_path.startswith("docs/") and (REPO / repo_path).is_file():
            files.append(File.generated(config, repo_path, abs_src_path=str(REPO / repo_path)))
    return files


def _rewrite_links(text: str, repo_path: str, page_uri: str) -> str:
    """Links written between repository files, pointed at the same files in the site."""
    def rewrite(match: re.Match) -> str:
        label, target = match.groups()
        path, hash_, anchor = target.partition("#")
        if not path or "://" in path or path.startswith(("/", "mailto:")):
            return match.group(0)
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        relative = posixpath.relpath(_site_path(resolved), posixpath.dirname(page_uri) or ".")
        return f"{label}({relative}{hash_}{anchor})"

    parts, last = [], 0
    for fence in FENCE.finditer(text):  # links inside code blocks are code
        parts += [LINK.sub(rewrite, text[last:fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(parts) + LINK.sub(rewrite, text[last:])


def _api_directive(match: re.Match, names: dict[str, str]) -> str:
    name = match.group(1)
    if name not in names:
        return match.group(0)
    module = names[name]
    path = module if module.rpartition(".")[2] == name else f"{module}.{name}"
    return (f"::: streamconv.{path}\n    options:\n"
            f"      heading: streamconv.{name}\n      toc_label: {name}")


def _table_code_pipes(text: str) -> str:
    """``\\|`` in a code span of a table row as ``|``: GitHub needs the backslash there to keep
    the cell whole, Python-Markdown keeps code spans whole and would show it."""
    def unescape(row: re.Match) -> str:
        return CODE_SPAN.sub(lambda span: span.group(0).replace("\\|", "|"), row.group(0))

    return TABLE_ROW.sub(unescape, text)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the generated parts, point mkdocstrings at the public names, rewrite the links."""
    def generate(match: re.Match) -> str:
        if match.group(1) not in GENERATED:
            raise ValueError(f"{page.file.src_uri}: nothing generates {match.group(0)}")
        return GENERATED[match.group(1)]()

    markdown = PLACEHOLDER.sub(generate, markdown)
    names = public_names()
    markdown = API_NAME.sub(lambda match: _api_directive(match, names), markdown)
    markdown = _table_code_pipes(markdown)
    return _rewrite_links(markdown, _repo_path(page.file.src_uri), page.file.src_uri)
