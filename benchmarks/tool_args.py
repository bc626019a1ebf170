"""What checking a tool call's arguments costs the host, per call.

One call of a Python tool ``create(user: str, items: list[Item], limit: int = 5)`` with two
items, its JSON argument list checked four ways:

- ``none``: decoded with msgspec into plain lists and dicts, no check (the registry before
  checks);
- ``msgspec``: decoded straight into the array-like Struct the registry builds from the
  signature (``codemode.tools._check.PositionalArguments``, what Python tools use);
- ``jsonschema``: decoded with msgspec, then validated against the same tool's inferred JSON
  Schema by jsonschema's compiled validator (``ObjectArguments``, what tools declared only by
  JSON Schema use), positional arguments put in an object first;
- ``registry``: the whole sync path of a registry call (route, check, call, encode the
  envelope), for scale.

    python benchmarks/tool_args.py [--calls 20000]

Prints the median of 7 rounds per way, in microseconds per call.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable

import msgspec

from codemode.tools import ToolRegistry
from codemode.tools._check import ObjectArguments, PositionalArguments
from codemode.tools._infer import read_signature


@dataclasses.dataclass
class Item:
    sku: str
    qty: int = 1


def create(user: str, items: list[Item], limit: int = 5) -> int:
    return len(items) + limit


ARGS = json.dumps(["ada", [{"sku": "a-1", "qty": 2}, {"sku": "b-2"}], 3])


def ways() -> dict[str, Callable[[], object]]:
    signature = read_signature(create, "store.create")
    positional = PositionalArguments(signature.positional)
    names = [p.name for p in signature.positional]
    by_schema = ObjectArguments(signature.parameters)
    registry = ToolRegistry()
    registry.add("store", "create", create)
    serve, is_async = registry.dispatch.route("store", "create")
    assert not is_async

    def checked_by_schema() -> object:
        values = msgspec.json.decode(ARGS)
        return by_schema.value(msgspec.json.encode([dict(zip(names, values, strict=False))]).decode())

    def checked_by_schema_without_reencoding() -> object:
        values = msgspec.json.decode(ARGS)
        error = next(by_schema._validator.iter_errors(dict(zip(names, values, strict=False))), None)
        assert error is None
        return values

    return {
        "none": lambda: msgspec.json.decode(ARGS),
        "msgspec": lambda: positional.values(ARGS),
        "jsonschema": checked_by_schema_without_reencoding,
        "jsonschema (as ObjectArguments)": checked_by_schema,
        "registry (route, check, call, envelope)": lambda: serve("store", "create", ARGS),
    }


def measure(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    options = parser.parse_args()
    found = ways()
    rounds: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(7):  # interleaved, so that a busy moment lands on every way alike
        for name, fn in found.items():
            rounds[name].append(measure(fn, options.calls))
    for name, samples in rounds.items():
        print(f"{name:42} {statistics.median(samples):8.2f} us/call")


if __name__ == "__main__":
    main()
