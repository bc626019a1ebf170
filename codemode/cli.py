"""The ``codemode`` command line.

::

    codemode run FILE            run the program in FILE
    codemode run -e CODE         run CODE
    codemode run -               run the program read from stdin
    codemode batch IN -o OUT     run every request of a JSON Lines file (see ``_batch.py``)
    codemode worker ...          start a fleet worker (needs the ``fleet`` extra)
    codemode mcp --config FILE   serve an execute tool over MCP (needs the ``mcp`` extra)

``run`` prints the outcome as one JSON object on stdout,
``{"result": ..., "error": ..., "logs": [{"level": ..., "text": ...}]}`` (with
``"error_detail": {"name", "message", "line", "column", "stack"}`` when the program threw),
and exits with

- ``0`` when the program succeeded,
- ``1`` when the outcome carries an ``error`` (the program threw, timed out, ran out of
  memory, ...: the run was served, the program failed),
- ``2`` for bad usage or a fault of the executor itself; the message on stderr names the
  fault code (``INVALID_REQUEST``, ``WORKER_CRASHED``, ...) and nothing is printed on stdout.

Options: ``--timeout MS``, ``--memory MB``, ``--normalize`` (pass the text through
:func:`codemode.normalize_code` first, so a fenced block or a bare expression runs),
``--no-network`` (``outbound=None``: fetch rejects with the declared text), ``--inputs
JSON`` or ``--inputs-file PATH`` (JSON passed to the entry function as its one argument).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["main"]

EXIT_OK = 0
EXIT_PROGRAM_ERROR = 1
EXIT_FAULT = 2

_FLEET_MODULES = frozenset({"celery", "kombu", "redis", "billiard", "hiredis"})


class _UsageError(Exception):
    """Bad usage: reported on stderr with exit status 2."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Run model-written JavaScript in a fresh V8 isolate.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser(
        "run",
        help="run one program and print its outcome as JSON",
        description=(
            "Run one program and print {result, error, logs} as JSON. Exit status: 0 the "
            "program succeeded, 1 the outcome has an error, 2 bad usage or an executor fault."
        ),
    )
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="a file holding the program, or - to read it from stdin",
    )
    source.add_argument("-e", "--eval", dest="code", metavar="CODE", help="the program itself")
    run.add_argument("--timeout", type=_positive_int, metavar="MS", help="the run's clock (ms)")
    run.add_argument("--memory", type=_positive_int, metavar="MB", help="the isolate's memory bound (MB)")
    run.add_argument(
        "--normalize",
        action="store_true",
        help="turn model output (a fence, a bare expression, ...) into the entry form first",
    )
    given = run.add_mutually_exclusive_group()
    given.add_argument(
        "--inputs",
        metavar="JSON",
        help="JSON passed to the entry function as its one argument: async ({ id }) => ...",
    )
    given.add_argument("--inputs-file", metavar="PATH", help="--inputs read from a file")
    run.add_argument(
        "--no-network",
        action="store_true",
        help="no network for the program: fetch rejects with the declared text",
    )

    from ._batch import add_batch_parser

    add_batch_parser(commands)
    commands.add_parser("mcp", help="serve an execute tool over MCP (codemode mcp --help)", add_help=False)
    commands.add_parser(
        "worker",
        help="start a fleet worker (needs the fleet extra: pip install 'codemode[fleet]')",
        add_help=False,
    )
    return parser


def _read_program(args: argparse.Namespace, stdin: TextIO) -> str:
    if args.code is not None:
        return str(args.code)
    path = str(args.file)
    if path == "-":
        raw = getattr(stdin, "buffer", None)
        if raw is None:
            return stdin.read()
        try:
            return bytes(raw.read()).decode("utf-8")
        except UnicodeDecodeError:
            raise _UsageError("cannot read stdin: it is not UTF-8 text") from None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise _UsageError(f"cannot read {path}: it is not UTF-8 text") from None


_NO_INPUTS = object()


def _read_inputs(args: argparse.Namespace) -> Any:
    """The run's inputs from --inputs or --inputs-file, as JSON data (``_NO_INPUTS``: none)."""
    if args.inputs is not None:
        text, where = str(args.inputs), "--inputs"
    elif args.inputs_file is not None:
        path = str(args.inputs_file)
        where = f"--inputs-file {path}"
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise _UsageError(f"cannot read {path}: it is not UTF-8 text") from None
    else:
        return _NO_INPUTS
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _UsageError(
            f"{where} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "pass a JSON value such as '{\"orderId\": 7}'"
        ) from None


async def _execute(code: str, args: argparse.Namespace, inputs: Any = _NO_INPUTS) -> Any:
    from ._executor import IsolateExecutor

    settings: dict[str, Any] = {"pool": {"max_workers": 1, "max_queue": 1}}
    if args.timeout is not None:
        settings["timeout"] = args.timeout
    if args.memory is not None:
        settings["memory_limit"] = args.memory
    request: dict[str, Any] = {}
    if args.no_network:
        request["outbound"] = None
    if inputs is not _NO_INPUTS:
        request["inputs"] = inputs
    async with IsolateExecutor(**settings) as executor:
        return await executor.execute(code, **request)


def _run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO, stdin: TextIO) -> int:
    from ._faults import ExecutorError
    from ._source.normalize import normalize_code

    try:
        code = _read_program(args, stdin)
        inputs = _read_inputs(args)
        if args.normalize:
            try:
                code = normalize_code(code)
            except ValueError as exc:
                raise _UsageError(str(exc)) from None
        try:
            code.encode("utf-8")
        except UnicodeEncodeError:
            # -e with bytes that are not UTF-8 arrive as lone surrogates.
            raise _UsageError("the program is not valid UTF-8 text") from None
    except _UsageError as exc:
        print(f"codemode run: {exc}", file=stderr)
        return EXIT_FAULT
    try:
        outcome = asyncio.run(_execute(code, args, inputs))
    except ExecutorError as exc:
        started = "the program had started" if exc.started else "no program code ran"
        print(
            f"codemode run: executor fault {exc.code} (retryable: {str(exc.retryable).lower()}, "
            f"{started}): {exc.message}",
            file=stderr,
        )
        for cause in exc.causes:
            print(f"  caused by: {cause}", file=stderr)
        return EXIT_FAULT
    except Exception as exc:  # a bug, not the program's failure: never exit 1 for it
        print(f"codemode run: unexpected failure ({type(exc).__name__}): {exc}", file=stderr)
        traceback.print_exc(file=stderr)
        return EXIT_FAULT
    payload = {
        "result": outcome.result,
        "error": outcome.error,
        "logs": [{"level": entry.level, "text": entry.text} for entry in outcome.logs],
    }
    if outcome.error_detail is not None:
        payload["error_detail"] = outcome.error_detail.to_dict()
    text = json.dumps(payload, ensure_ascii=False)
    try:
        text.encode(stdout.encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(payload)  # \u escapes: still the same JSON, in ASCII
    print(text, file=stdout)
    stdout.flush()
    return EXIT_OK if outcome.error is None else EXIT_PROGRAM_ERROR


def _fleet_missing(exc: ModuleNotFoundError, stderr: TextIO) -> int:
    """The install sentence when ``exc`` is a module of the fleet extra; else re-raise."""
    if (exc.name or "").split(".")[0] not in _FLEET_MODULES:
        raise exc
    print(
        "codemode worker: the fleet is not installed (missing module "
        f"{exc.name!r}). Install the fleet extra: pip install 'codemode[fleet]'.",
        file=stderr,
    )
    return EXIT_FAULT


def _worker(argv: list[str], stderr: TextIO) -> int:
    try:
        module = importlib.import_module("codemode.fleet.worker.cli")
    except ModuleNotFoundError as exc:
        return _fleet_missing(exc, stderr)
    entry = getattr(module, "main", None)
    if not callable(entry):
        print("codemode worker: codemode.fleet.worker.cli has no main(argv) to call.", file=stderr)
        return EXIT_FAULT
    try:
        status = entry(argv)
    except SystemExit as exc:  # the fleet's own argparse (--help, bad flags)
        return exc.code if isinstance(exc.code, int) else EXIT_FAULT
    except ModuleNotFoundError as exc:  # the fleet's modules load as the worker starts
        return _fleet_missing(exc, stderr)
    return int(status) if isinstance(status, int) else EXIT_OK


def _mcp(argv: list[str]) -> int:
    try:
        from .mcp._command import main as serve
    except ModuleNotFoundError as exc:
        print(
            f"codemode mcp: the MCP SDK is missing ({exc.name!r}): pip install 'codemode[mcp]'.",
            file=sys.stderr,
        )
        return EXIT_FAULT
    return serve(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "worker":
        # Everything after `worker` belongs to the fleet's own parser.
        return _worker(args_list[1:], sys.stderr)
    if args_list and args_list[0] == "mcp":
        return _mcp(args_list[1:])
    parser = _build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 on --help
        return exc.code if isinstance(exc.code, int) else EXIT_FAULT
    if args.command == "run":
        return _run(args, sys.stdout, sys.stderr, sys.stdin)
    if args.command == "batch":
        from ._batch import run_batch

        return run_batch(args, sys.stderr)
    parser.print_usage(sys.stderr)
    return EXIT_FAULT


if __name__ == "__main__":
    sys.exit(main())
