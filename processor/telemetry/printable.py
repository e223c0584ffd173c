"""Sender text made safe to print: every control character shown as a visible escape.

Tool, server and turn names come from outsiders' spans. Printed raw, a newline forges a
log line or a table row, an escape sequence drives the operator's terminal, and a bidi
override makes a line read differently from what it holds. ``escape_controls`` turns each
such character into the escape Python would write for it (``\\n``, ``\\x1b``, ``\\u202e``),
so what was sent stays readable and one value stays on one line. A backslash is left as it
is: the text is for people to read, never parsed back.
"""

from __future__ import annotations

import re

# C0 and C1 controls with DEL; the line and paragraph separators, which str.splitlines()
# and some log viewers break on; bidi embeddings, overrides, isolates and marks, which
# reorder what a person sees; lone surrogates, which a UTF-8 stream cannot even encode.
_CONTROLS = (
    "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
)
_ANY = re.compile(f"[{_CONTROLS}]")
# Tracebacks of our own errors keep their lines; every other control is still escaped.
_ANY_BUT_NEWLINE = re.compile(f"(?!\n)[{_CONTROLS}]")


def _visible(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with each control character written as its escape: one line, inert."""
    return (_ANY_BUT_NEWLINE if keep_newlines else _ANY).sub(_visible, text)
