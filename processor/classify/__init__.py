"""Classification: MCP spans of any supported dialect to normalized events.

spanview.py     a plain view of one protobuf span, read only for MCP-looking spans
reading.py      what one span says of a call (Reading), and how it says the call ended
dialects.py     one reader per instrumentation: span -> Reading
frameworks.py   the agent frameworks' own tool spans
listing.py      listing counts, checked
annotations.py  the annotations written on each MCP span, for a span exported twice
recent.py       bounded sets of recent keys, each forgotten after a time-to-live
classifier.py   the entry point: a request's spans read, grouped into calls and listings
pairing.py      the keys that make two halves one call, the half held for its other
deciding.py     CallDecider: held halves and decided keys, to the events
identity.py     a call's fingerprint, its session and its tool
events.py       what comes out: ToolCall, ToolListing

What a harness judges alike (the verdict, outcome signals, a result's reading, the
fingerprint, redaction) is the client's shared package, mcp_breaker_client.shared.
"""
