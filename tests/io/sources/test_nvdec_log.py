"""The NVDEC decode-error counter (streamconv.io.sources.nvdec.log), without a GPU: a child process
prints as PyNvVideoCodec does (C printf, buffered) while logs are open; the marker lines are
counted and kept off stdout, every other byte reaches stdout in order."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import ctypes, sys
    from streamconv.io.sources.nvdec.log import DecodeErrorLog
    libc = ctypes.CDLL(None)
    counts = []
    for round_ in range(2):
        first = DecodeErrorLog().open()
        libc.printf(b"Decode Error occurred for picture 7\\n")
        libc.printf(b"c-line %d\\n", round_)
        second = DecodeErrorLog().open()  # a second source opens while the first is open
        libc.printf(b"Decode Error occurred for picture 8\\n")
        sys.stdout.buffer.write(bytes(range(256)))  # binary output, e.g. a video to stdout
        print("py-line", round_)
        first.close()  # not the last: the counter syncs, the pipe stays
        libc.printf(b"Decode Error occurred for picture 9\\n")
        second.close()
        counts.append((first.count, second.count))
    print(counts, file=sys.stderr)
""")


def test_decode_errors_are_counted_and_kept_off_stdout():
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    assert b"Decode Error" not in result.stdout
    expected = b"".join(b"c-line %d\n" % n + bytes(range(256)) + b"py-line %d\n" % n
                        for n in range(2))
    assert result.stdout == expected
    # The first log saw pictures 7 and 8; the second 8 and 9.
    assert result.stderr.decode().strip() == "[(2, 2), (2, 2)]"


def test_an_unopened_log_counts_nothing_and_closes_quietly():
    from streamconv.io.sources.nvdec.log import DecodeErrorLog

    log = DecodeErrorLog()
    log.close()
    log.close()
    assert log.count == 0
