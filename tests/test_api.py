"""The public API: one sorted ``__all__`` that names every public re-export."""

from __future__ import annotations

import codemode
import codemode.fleet


def _public(module: object) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("codemode")
        and not isinstance(value, type(codemode))
    }


def test_all_is_sorted_and_complete() -> None:
    names = list(codemode.__all__)
    # isort style: CONSTANTS, then Classes, then functions, each sorted.
    assert names == sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    missing = _public(codemode) - set(names)
    assert not missing, f"public names not in codemode.__all__: {sorted(missing)}"
    for name in names:
        assert hasattr(codemode, name), name


def test_the_fleet_client_exports_its_executor() -> None:
    assert "FleetExecutor" in codemode.fleet.__all__
    assert all(hasattr(codemode.fleet, n) for n in codemode.fleet.__all__)


def test_every_fault_is_an_executor_error_with_a_stable_code() -> None:
    faults = [
        getattr(codemode, n)
        for n in codemode.__all__
        if isinstance(getattr(codemode, n), type) and issubclass(getattr(codemode, n), codemode.ExecutorError)
    ]
    codes = {f.code for f in faults}
    assert {
        "QUEUE_FULL",
        "WORKER_CRASHED",
        "DISPOSED",
        "INVALID_REQUEST",
        "BROKER_UNREACHABLE",
        "HOST_GONE",
        "JOB_EXPIRED",
        "HANDLE_LOST",
        "HANDLE_EXPIRED",
    } <= codes
    for fault in faults:
        data = fault("x", started=True).to_data()
        again = codemode.fault_from_data(data)
        assert type(again) is fault and again.started and again.retryable == fault.retryable


def test_constants_and_sentences_live_in_their_own_modules() -> None:
    """The top-level ``__all__`` stays small: the defaults and bounds are in
    ``codemode.limits``, the declared sentences in ``codemode.texts``, each complete."""
    import codemode.limits
    import codemode.texts

    for module in (codemode.limits, codemode.texts):
        names = list(module.__all__)
        assert names == sorted(names, key=lambda n: (0 if n.isupper() else 1, n)), module.__name__
        assert all(hasattr(module, n) for n in names)
        assert not set(names) & set(codemode.__all__)
    assert codemode.texts.timeout_text(300).startswith("Execution timed out at its 300 ms bound.")
    assert codemode.limits.DEFAULT_TIMEOUT_MS > 0
    assert len(codemode.__all__) <= 40
