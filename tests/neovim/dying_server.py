"""A relay in front of the real agent-server that dies while a session is being resumed (tests only).

Run as ``python dying_server.py DIR -- CMD…``: CMD runs as its child, the client's lines are passed to
it, its output goes straight to the client. While ``DIR/armed`` exists, the first ``session/resume``
request is held: ``armed`` is removed, ``DIR/seen`` written, and once a line arrives on the FIFO
``DIR/go`` (the test's signal) it is ``die`` — the child is killed and the relay exits 3: a server that
died during the resume — or ``pass`` — the request goes on (the test did something meanwhile).
Without ``armed`` it only relays.
"""

from __future__ import annotations

import os
import subprocess
import sys


def main() -> int:
    folder, cmd = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    armed, seen, go = (os.path.join(folder, name) for name in ("armed", "seen", "go"))
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    assert child.stdin is not None
    for line in sys.stdin.buffer:
        if b'"session/resume"' in line and os.path.exists(armed):
            os.remove(armed)
            with open(seen, "w"):
                pass
            with open(go) as signal:  # blocks until the test opens the FIFO and writes
                what = signal.readline().strip()
            if what != "pass":
                child.kill()
                child.wait()
                os._exit(3)
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
