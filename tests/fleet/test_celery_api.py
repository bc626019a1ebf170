"""The Celery API the worker's request path relies on (``worker/request.py``,
``worker/strategy.py``) is there in the installed release, and a release that changes it
fails these checks with a sentence naming what changed and where it is used."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.fleet.worker.request import check_request_api
from codemode.fleet.worker.strategy import check_strategy_api
from codemode.fleet.worker.transport import check_kombu_api


def test_the_installed_celery_has_what_the_request_path_relies_on() -> None:
    check_request_api()
    check_strategy_api()


def test_a_request_class_without_terminate_fails_with_a_sentence() -> None:
    class Moved:
        id = time_start = expires = kwargs = args = None

        def revoked(self) -> bool:
            return False

        def send_event(self, type: str, **fields: Any) -> None:
            pass

    with pytest.raises(RuntimeError, match=r"Request\.terminate.*codemode/fleet/worker/request\.py"):
        check_request_api(Moved)


def test_a_request_class_whose_terminate_changed_fails_with_a_sentence() -> None:
    class Changed:
        id = time_start = expires = kwargs = args = None

        def terminate(self, how: str) -> None:
            pass

        def revoked(self) -> bool:
            return False

        def send_event(self, type: str, **fields: Any) -> None:
            pass

    with pytest.raises(RuntimeError, match="pin Celery below it"):
        check_request_api(Changed)


def test_the_installed_kombu_has_what_the_transport_relies_on() -> None:
    check_kombu_api()


def test_a_kombu_without_an_internal_fails_with_a_sentence() -> None:
    class Moved:
        pass

    with pytest.raises(RuntimeError, match=r"Moved\._brpop_read.*codemode/fleet/worker/transport\.py"):
        check_kombu_api(((Moved, "_brpop_read"),))
