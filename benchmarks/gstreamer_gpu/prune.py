"""Prune an unpacked GStreamer tree (prepare.sh) to what the GPU runs load: the plugins below and
the libraries they reach, documentation and translations left out. Prints the shared libraries
that none of the packages provides: the GPU machine's own system must have them (libc, zlib...).

    python3 prune.py ROOT
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

PLUGINS = {"coreelements", "coretracers", "app", "videotestsrc", "videoconvertscale", "playback",
           "typefindfunctions", "isomp4", "videoparsersbad", "nvcodec", "python"}
EXPECTED_ON_THE_MACHINE = {
    "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1",
    "libz.so.1", "libffi.so.8", "liblzma.so.5", "libbz2.so.1.0", "libzstd.so.1", "libexpat.so.1",
    "libmount.so.1", "libselinux.so.1", "libpcre2-8.so.0", "libcap.so.2"}


def needed(path: Path) -> list[str]:
    """The sonames an ELF file asks the dynamic linker for."""
    text = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    return re.findall(r"Shared library: \[(.+?)\]", text)


def main(root: Path) -> int:
    for folder in ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian",
                   "usr/share/bash-completion", "usr/share/gtk-doc"):
        shutil.rmtree(root / folder, ignore_errors=True)
    plugins = root / "usr/lib/x86_64-linux-gnu/gstreamer-1.0"
    for plugin in plugins.glob("libgst*.so"):
        if plugin.name[len("libgst"):-len(".so")] not in PLUGINS:
            plugin.unlink()
    libraries = {path.name: path for path in root.rglob("*.so*")}
    start = [*plugins.glob("*.so"), *(root / "usr/bin").glob("gst-*"),
             *(root / "usr/lib/x86_64-linux-gnu/gstreamer1.0").rglob("gst-plugin-scanner"),
             *(root / "usr/lib/python3/dist-packages/gi").rglob("*.so")]
    seen, missing = set(), set()
    while start:
        path = start.pop()
        if path in seen:
            continue
        seen.add(path)
        for soname in needed(path):
            if soname in libraries:
                start.append(libraries[soname].resolve())
            else:
                missing.add(soname)
    unexpected = sorted(missing - EXPECTED_ON_THE_MACHINE)
    print(f"kept {len(list(plugins.glob('*.so')))} plugins; the machine must provide: "
          f"{', '.join(sorted(missing))}")
    if unexpected:
        print(f"not provided and not usually in a base system: {', '.join(unexpected)}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
