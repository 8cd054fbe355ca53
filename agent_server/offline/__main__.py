"""Command line of the offline endpoint.

Role: ``python -m agent_server.offline [--host H] [--port 0] [--script FILE.json|demo|demo-task]
[--project DIR] [--record FILE.jsonl] [--reject-invalid-history]`` serves a script until killed. The first stdout line is the base URL
(``http://127.0.0.1:PORT/v1``), flushed at once, so a parent process can read it; a human-readable
note goes to stderr. SIGTERM and SIGINT stop it cleanly (exit status 0).

Must never: print anything else on stdout (the first line is a contract with callers).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from contextlib import suppress
from pathlib import Path

from ._script import load_script
from ._server import OfflineEndpoint


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent_server.offline",
        description="Offline OpenAI-compatible endpoint that replays a script (not a model).")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument("--script", default="demo",
                        help="script file (JSON), 'demo' for the bundled hello (default), or 'demo-task' for "
                             "the demo's small real task (fix a failing test), answered per step: any number "
                             "of runs")
    parser.add_argument("--project", metavar="DIR",
                        help="with --script demo-task: write the task's project (a failing test) into DIR, "
                             "a new or empty folder (a folder with files in it is refused)")
    parser.add_argument("--record", default=None, help="append each request to this JSONL file")
    parser.add_argument("--reject-invalid-history", action="store_true",
                        help="answer 400, as providers do, to a request with a tool call without its "
                             "result or an empty assistant message")
    parser.add_argument("--api-key", default=None, metavar="KEY",
                        help="require `Authorization: Bearer KEY` on every request, else 401 as providers do "
                             "(to try `agent-server login`); default: no key needed")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    script = load_script(args.script)
    if args.project:
        from .demo_task import write_project

        project = Path(args.project)
        if project.is_dir() and any(project.iterdir()):
            raise ValueError(f"--project {project} is not empty: its files would be overwritten by the demo "
                             "project's; give a new or empty folder")
        write_project(project)
    endpoint = OfflineEndpoint(script, host=args.host, port=args.port, record_path=args.record,
                               reject_invalid_history=args.reject_invalid_history, api_key=args.api_key)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with endpoint:
        sys.stdout.write(endpoint.base_url + "\n")
        sys.stdout.flush()
        print(f"offline endpoint (scripted, not a model) at {endpoint.base_url}: "
              f"{len(script.responses)} scripted response(s)"
              f"{', replayed in a loop' if script.loop else ''}"
              f"{', answered per step (reusable)' if script.by_step else ''}"
              f"{f', recording to {args.record}' if args.record else ''}",
              file=sys.stderr, flush=True)
        if args.script == "demo-task":
            where = Path(args.project).resolve() if args.project else "DIR"
            print(f"try it: AGENT_SERVER_BASE_URL={endpoint.base_url} AGENT_SERVER_MODEL=offline-demo "
                  f"agent-server run -p 'The tests fail; fix them.' --cwd {where}", file=sys.stderr, flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for a bad script, a port in use or a ``--project``
    folder that is not empty)."""
    args = _parse(argv)
    try:
        asyncio.run(_serve(args))
    except (OSError, ValueError) as exc:
        print(f"offline endpoint: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
