"""What numba-cuda's test classes expect from pytest (its repository's conftest, which the
wheel does not ship): the `initialize_from_pytest_config` fixture and its one option."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
