"""JSON text without whitespace, from the standard library's C encoder built once.

``json.dumps`` with any option set, and ``JSONEncoder.encode``, build a new C encoder on
every call, which costs about as much as encoding a small value again (a call's arguments
for its fingerprint, a tool call for the shared stream). The encoder keeps no state
between calls, so one is built per set of options and kept. It is built without the check
for circular references: every value given to it is a tree its caller built itself,
bounded in depth. Its output is what ``JSONEncoder.encode`` gives with the same options.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

SEPARATORS = (",", ":")


def compact_encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """``encode(value) -> str``: compact JSON, non-ASCII text as it is, NaN allowed (as
    ``json.dumps`` allows it), keys sorted or in their order."""
    fallback = json.JSONEncoder(sort_keys=sort_keys, separators=SEPARATORS, ensure_ascii=False)
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return fallback.encode
    encoder = c_make_encoder(
        None,  # no markers: no check for circular references (see above)
        fallback.default,
        encode_basestring,
        None,  # no indent
        fallback.key_separator,
        fallback.item_separator,
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan
    )

    def encode(value: Any) -> str:
        return "".join(encoder(value, 0))

    return encode
