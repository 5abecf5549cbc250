"""`python -m pykueue.standalone`: the standalone server program that `pykueue up` executes."""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
from pathlib import Path

from pykueue.errors import PykueueError
from pykueue.standalone import runtime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pykueue up", description="Run standalone pykueue.")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=runtime.DEFAULT_PORT)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--client-config", type=Path, default=None)
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--socket", type=Path, default=None)
    parser.add_argument("--work-dir", type=Path, default=None)
    # `up --demo` made the data and work folders for this run: they go when it stops.
    parser.add_argument("--throwaway", action="store_true")
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack
    options = runtime.Options(
        data_dir=args.data,
        host=args.host,
        port=args.port,
        config=args.config,
        demo=args.demo,
        client_config=args.client_config,
        quiet=args.quiet,
        socket=args.socket,
        work_dir=args.work_dir,
        throwaway=args.throwaway,
    )
    try:
        runtime.serve(options)
    except PykueueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
