"""Puts the `python/` folder on sys.path, so every test imports the `ksmith` package as it is in
the checkout, however pytest is started; registers the `trainers` marker.

The tests under `trainers/` need the trainers' environment (verl, TRL, OpenRLHF:
scripts/setup-trainers.sh) and are the heavy part of the Python tests: they are collected only
when the marker expression names them (`make test-trainers` runs
`pytest -m trainers python/tests/trainers` in that environment; `make test` includes it)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "trainers: runs verl, TRL and OpenRLHF on exported datasets (the trainers' environment)"
    )


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "trainers" and "trainers" not in (config.getoption("markexpr") or ""):
        return True
    return None
