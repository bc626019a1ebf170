"""The declared sentences a program's model reads, exactly as the executor writes them.

A run that hit a bound comes back with one of these as ``Outcome.error``; tests and hosts can
compare against them word for word::

    from codemode.texts import timeout_text

    assert outcome.error == timeout_text(300)
"""

from __future__ import annotations

from ._faults import CANCELLED_TEXT
from ._texts import NETWORK_DISABLED, memory_text, message_ceiling_text, timeout_text

__all__ = [
    "CANCELLED_TEXT",
    "NETWORK_DISABLED",
    "memory_text",
    "message_ceiling_text",
    "timeout_text",
]
