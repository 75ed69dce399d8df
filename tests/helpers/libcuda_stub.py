"""A stub libcuda.so.1, for a driver where there is none: PyCUDA built and imported in CI
(.ci/pycuda-build), and a driver of another CUDA version than the installed bindings'.

    python tests/helpers/libcuda_stub.py DIR [--version 13000] [LIBRARY ...]

Writes DIR/libcuda.so.1 (and the libcuda.so link the linker wants) whose cuDriverGetVersion says
CUDA 13.0 (or ``--version``), so that `streamconv install-cuda` picks CUDA 13's header wheels,
whose error names and strings read CUDA_ERROR_STUB_LIBRARY, and whose every other function
returns that error (34). With LIBRARY arguments (built extensions), it also defines every cu*
function they import, so that Python can load them (it binds every symbol at load time).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

STUB_LIBRARY = 34  # CUDA_ERROR_STUB_LIBRARY


def imported_functions(library: str) -> set[str]:
    """The cu* symbols ``library`` leaves for libcuda to define."""
    listed = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                            text=True, check=True).stdout
    return {match.group(1) for match in re.finditer(r"\bU (cu[A-Z]\w*)", listed)}


def write_stub(folder: Path, functions: set[str], version: int = 13000) -> Path:
    """Compile the stub of CUDA ``version`` into ``folder``; returns its path."""
    lines = [f"int cuDriverGetVersion(int *version) {{ *version = {version}; return 0; }}"]
    named = {"cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString"}
    for name in ("cuGetErrorName", "cuGetErrorString"):  # error messages read what these point to
        lines.append(f"int {name}(int error, const char **text) "
                     '{ *text = "CUDA_ERROR_STUB_LIBRARY"; return 0; }')
    lines += [f"int {name}(void) {{ return {STUB_LIBRARY}; }}"
              for name in sorted(functions - named)]
    if "cuInit" not in functions:
        lines.append(f"int cuInit(unsigned flags) {{ return {STUB_LIBRARY}; }}")
    folder.mkdir(parents=True, exist_ok=True)
    stub = folder / "libcuda.so.1"
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "stub.c"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(stub),
                        str(source)], check=True)
    link = folder / "libcuda.so"
    if not link.exists():
        link.symlink_to("libcuda.so.1")
    return stub


def main(argv: list[str]) -> int:
    folder, *libraries = argv
    version = 13000
    if libraries[:1] == ["--version"]:
        version, libraries = int(libraries[1]), libraries[2:]
    functions: set[str] = set()
    for library in libraries:
        functions |= imported_functions(library)
    stub = write_stub(Path(folder), functions, version)
    print(f"stub libcuda: {stub} (CUDA {version}, {len(functions)} functions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
