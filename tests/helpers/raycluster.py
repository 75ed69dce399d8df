"""A real Ray cluster for a test: a head node with two worker CPUs, started inside a network
namespace of the test's own that has only loopback, beside the test's own commands; stopped by
the process group the test started. Ray's session files go to a tmpfs of that namespace's own
(nothing of the cluster outlives it, and a later ``ray.init()`` here is not sent to it).
``why_not`` says why it cannot be made here (tests skip)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
PORT = 46379
ADDRESS = f"127.0.0.1:{PORT}"


def why_not() -> str | None:
    """Why no cluster can be started here (a skip reason), or None."""
    if importlib.util.find_spec("ray") is None or not RAY.exists():
        return "Ray is not installed (pip install 'streamconv[ray]')"
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return "a network namespace of the test's own needs root, unshare and ip"
    probe = subprocess.run(["unshare", "-n", "-m", "true"], capture_output=True)
    return None if probe.returncode == 0 else f"unshare -n -m refused here: {probe.stderr.decode().strip()}"


def killer(folder: Path, task: str, *, after: float = 0.3) -> str:
    """A command that SIGKILLs the first Ray worker running ``task`` once it has run for
    ``after`` seconds, and prints its pid (exit 1 if no worker ever ran one)."""
    script = folder / f"kill-{task}.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
            busy = [int(line.split()[0]) for line in lines if "ray::{task}" in line]
            if busy:
                time.sleep({after})  # well into its work
                os.kill(busy[0], signal.SIGKILL)
                print(busy[0])
                sys.exit(0)
            time.sleep(0.05)
        sys.exit("no Ray worker ever ran {task}")
    """))
    return f"{sys.executable} {script}"


# A prefix for a command the script sends SIGINT: bash starts a background job (``cmd &``) with
# SIGINT ignored, and streamconv leaves an ignored SIGINT ignored, as Python does; this puts the
# default back before the command is executed, as an interactive shell's job would have it.
SIGINT_RESTORED = (f"{sys.executable} -c 'import os, signal, sys; "
                   "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], "
                   "sys.argv[1:])'")


def run_in_cluster(folder: Path, commands: str, *, timeout: float = 600) -> None:
    """Start the cluster, run the bash ``commands`` beside it (RAY_ADDRESS set to it; their
    output is theirs to redirect into ``folder``), then stop it; its log is ``folder/ray.log``."""
    script = textwrap.dedent(f"""
        set -u
        ip link set lo up
        mkdir -p /tmp/ray && mount -t tmpfs tmpfs /tmp/ray
        # Token authentication off: the cluster and the commands share a namespace holding only loopback.
        export RAY_ADDRESS={ADDRESS} RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled
        setsid {RAY} start --head --block --node-ip-address=127.0.0.1 --port={PORT} --num-cpus=2 \\
            --include-dashboard=false --disable-usage-stats > {folder}/ray.log 2>&1 &
        CLUSTER=$!
        for i in $(seq 120); do {RAY} status --address {ADDRESS} > /dev/null 2>&1 && break; sleep 0.5; done
    """) + textwrap.dedent(commands) + textwrap.dedent("""
        kill -TERM -- -$CLUSTER 2> /dev/null; sleep 2; kill -KILL -- -$CLUSTER 2> /dev/null
        wait
    """)
    subprocess.run(["unshare", "-n", "-m", "bash", "-c", script], timeout=timeout, check=False)


def leftover_processes() -> list[str]:
    """Pids of cluster processes still alive after :func:`run_in_cluster` (should be none)."""
    return subprocess.run(["pgrep", "-f", f"port={PORT}"], capture_output=True,
                          text=True).stdout.split()
