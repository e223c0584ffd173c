"""Logging for people: one line per event, no span payloads, level from the config."""

from __future__ import annotations

import logging
import sys

from processor.config import LogLevel

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure(level: LogLevel) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.value.upper())
    # aiohttp and grpc are chatty at INFO about things an operator did not ask about.
    for noisy in ("aiohttp.access", "grpc._cython"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
