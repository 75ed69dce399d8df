"""The package's shape stays as docs/architecture.md describes it: its folders in a layer order
that imports run down, never up, no import circles (type-only imports counted), a small top, no
crowded folder, small modules, short functions. Read from the sources (ast), nothing imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "streamconv"
MAX_MODULE_LINES = 430   # "about 400"
MAX_FUNCTION_LINES = 50  # def line to last line; a longer one says why in a "# long:" comment
MAX_TOP_MODULES = 8      # the package's face: __init__, __main__, errors, interrupts, launch...
MAX_FLAT_MODULES = 15    # modules side by side in one folder, its __init__ not counted

LAYERS = (  # the package's rooms, lowest first: a room imports only rooms of lower layers
    ("errors", "version"),
    ("files", "interrupts"),
    ("frames",),
    ("gpu",),
    ("interop",),
    ("nn",),
    ("chain",),
    ("io",),
    ("backends",),
    ("run",),
    ("embed", "jobs", "bench", "report"),
    ("gst",),
    ("cli",),
    ("launch", "prebuild"),
    ("__main__",),
)
"""``streamconv.X`` (a top-level module or package) -> its layer is its row's index."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """streamconv modules ``name`` imports, at module level, in functions or under
    TYPE_CHECKING (a type-only import ties the modules as much for a reader and a type
    checker); importing a submodule from outside its package counts as importing the package
    too, since its ``__init__`` runs first."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and \
                    (child.level or (child.module or "").startswith("streamconv")):
                if child.level:
                    base = package[: len(package) - (child.level - 1)] + ([child.module]
                                                                          if child.module else [])
                    target = ".".join(base)
                else:
                    target = child.module
                found.update(c for c in [target, *(f"{target}.{a.name}" for a in child.names)]
                             if c in MODULES)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name in MODULES)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    for target in list(found):
        parts = target.split(".")
        for k in range(1, len(parts)):
            parent = ".".join(parts[:k])
            if parent in MODULES and not name.startswith(parent + ".") and name != parent:
                found.add(parent)
    found.discard(name)
    return found


def test_no_module_imports_itself_back_through_others():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    cycles = []

    def walk(start: str, node: str, trail: list[str]) -> None:
        for nxt in graph[node]:
            if nxt == start:
                cycles.append(" -> ".join(trail + [nxt]))
            # each cycle found once, from its smallest module
            elif nxt not in trail and nxt > start:
                walk(start, nxt, trail + [nxt])

    for name in sorted(graph):
        walk(name, name, [name])
    assert cycles == [], "\n".join(cycles[:10])


def _room(name: str) -> str:
    """streamconv.io.sinks.file -> io; streamconv (its face, ``__init__``) -> ""."""
    return name.split(".")[1] if "." in name else ""


LAYER_OF = {room: index for index, rooms in enumerate(LAYERS) for room in rooms}


def test_every_room_has_a_layer():
    rooms = {_room(name) for name in MODULES} - {""}
    assert sorted(rooms - set(LAYER_OF)) == [], "add the new folder or module to LAYERS"


def test_imports_run_down_the_layers_never_up():
    """A lower layer never imports a higher one (nor one beside it), type-only imports counted;
    the package's ``__init__`` (the face, every export lazy) is above them all."""
    upward = []
    for name, path in MODULES.items():
        room = _room(name)
        if not room:
            continue
        for target in _imports(name, path):
            other = _room(target)
            if other and other != room and LAYER_OF.get(other, -1) >= LAYER_OF.get(room, -1):
                upward.append(f"{name} -> {target}")
    assert sorted(upward) == []


def test_the_top_of_the_package_holds_only_its_face():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_folder_holds_more_than_about_15_modules_side_by_side():
    crowded = {}
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        flat = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if folder != PACKAGE and len(flat) > MAX_FLAT_MODULES:
            crowded[str(folder.relative_to(PACKAGE))] = len(flat)
    assert crowded == {}


def test_modules_stay_about_400_lines():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_functions_stay_short_or_say_why():
    long = []
    for name, path in MODULES.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                body = lines[start - 1: node.end_lineno]
                if len(body) > MAX_FUNCTION_LINES and not any("# long:" in line for line in body):
                    long.append(f"{name}.{node.name}: {len(body)} lines")
    assert long == []


def test_every_module_says_what_it_is_for():
    missing = [name for name, path in MODULES.items()
               if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert missing == []


def _classes() -> dict[str, tuple[list[str], set[str], set[str]]]:
    """Every class in the package by name: (its bases' names, its methods, the ``self.X`` it
    assigns)."""
    found: dict[str, tuple[list[str], set[str], set[str]]] = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(base).split(".")[-1] for base in node.bases]
            methods = {item.name for item in node.body
                       if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            assigned = {target.attr for item in ast.walk(node)
                        for target in getattr(item, "targets", [])
                        if isinstance(target, ast.Attribute)
                        and ast.unparse(target.value) == "self"}
            found[node.name] = (bases, methods, assigned)
    return found


def test_no_attribute_shadows_a_method_of_its_class_or_a_base():
    """``self._x = 0`` in a subclass hides a base class's method ``_x`` from every caller: code
    paths a test machine cannot run (NVDEC, CUDA) would break unseen."""
    classes = _classes()

    def methods_of(name: str, seen: frozenset = frozenset()) -> set[str]:
        if name not in classes or name in seen:
            return set()
        bases, methods, _ = classes[name]
        return methods.union(*(methods_of(base, seen | {name}) for base in bases))

    clashes = {f"{name}.{attr}" for name, (_, _, assigned) in classes.items()
               for attr in assigned & methods_of(name)}
    assert clashes == set()


def test_every_package_names_its_modules():
    """Each folder's ``__init__`` docstring names every module and folder beside it, so that a
    reader finds a module's home from the package's help."""
    unnamed = []
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        if folder == PACKAGE or "plugin" in folder.relative_to(PACKAGE).parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        members = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        members += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
        unnamed += [f"{folder.relative_to(PACKAGE)}/{m}" for m in members
                    if not re.search(rf"(?<![\w]){re.escape(m)}(?![\w])", doc)]
    assert sorted(unnamed) == []
