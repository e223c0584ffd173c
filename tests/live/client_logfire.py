"""Capture client for the ``logfire`` stack: mcp 1.x ``ClientSession`` + Logfire."""

from __future__ import annotations

import mcp1_common

if __name__ == "__main__":
    mcp1_common.main("logfire")
