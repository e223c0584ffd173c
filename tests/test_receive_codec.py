"""processor/receive/codec.py: OTLP/JSON bodies read, and the ones it refuses named."""

from __future__ import annotations

import pytest

from processor.errors import InvalidRequest
from processor.receive.codec import request_from_json


@pytest.mark.parametrize("depth", [70, 5_000], ids=["past our bound", "past the decoder's"])
def test_valid_json_nested_too_deep_is_refused_as_such(depth: int) -> None:
    """Not 'not valid JSON': it is valid, and the sender should be told what is wrong."""
    value = '{"stringValue": "deep"}'
    for _ in range(depth):
        value = '{"arrayValue": {"values": [' + value + "]}}"
    body = (
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + "1" * 32 + '", '
        '"spanId": "'
        + "2" * 16
        + '", "name": "s", "attributes": [{"key": "k", "value": '
        + value
        + "}]}]}]}]}"
    ).encode()
    with pytest.raises(InvalidRequest, match="JSON nested deeper than"):
        request_from_json(body)


def test_what_is_not_json_is_said_to_be_so() -> None:
    with pytest.raises(InvalidRequest, match="body is not valid JSON"):
        request_from_json(b'{"resourceSpans": [')
