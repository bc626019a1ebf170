"""A short, ready block for a model's prompt: the entry form, the tools' declarations, and
the rules on errors and logs, in the words the executor's own answers use."""

from __future__ import annotations

from collections.abc import Iterable

from ._spec import ToolSpec
from ._typescript import typescript_declarations

__all__ = ["prompt_block"]

_FENCE = "```"


def prompt_block(specs: Iterable[ToolSpec], *, network: bool = False) -> str:
    """The prompt text for a model that answers with a program calling ``specs``.

    ``network`` says whether runs may use ``fetch`` (give the same choice as the
    executor's ``outbound``); without it the model is told that everything from outside
    arrives through the tools."""
    declarations = typescript_declarations(specs).rstrip("\n")
    outside = (
        "`fetch` reaches the network; everything else from outside arrives through the tools."
        if network
        else "There is no network, file system or process: everything from outside arrives through the tools."
    )
    lines = [
        "Answer by writing one program: an async arrow function, `async () => { ... }`, in a "
        f"{_FENCE}ts block. It runs once, in a sandbox, and the value it returns (JSON data) is its result. "
        "TypeScript types are allowed (they are stripped before it runs); enums, namespaces and "
        "decorators are not.",
        "",
        "Besides the standard JavaScript built-ins, the program can call these tools:",
        "",
        f"{_FENCE}ts",
        declarations or "// (no tools)",
        _FENCE,
        "",
        "- Every tool call returns a Promise: `await` it, and start independent calls together "
        "with `Promise.all`.",
        "- A call that fails rejects with an Error whose message says why: catch it to try "
        "another way, or let the program end and the message comes back to you.",
        "- What the program writes with `console.log` comes back to you with its result: note "
        "what you found there, and return the answer.",
        f"- {outside}",
    ]
    return "\n".join(lines) + "\n"
