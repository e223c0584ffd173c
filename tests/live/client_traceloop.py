"""Capture client for the ``traceloop`` stack: mcp 1.x ``ClientSession`` + OpenLLMetry."""

from __future__ import annotations

import mcp1_common

if __name__ == "__main__":
    mcp1_common.main("traceloop")
