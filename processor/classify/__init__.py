"""Classification: MCP spans of any supported dialect to normalized events.

spanview.py    a plain view of one protobuf span, read only for MCP-looking spans
dialects.py    one reader per instrumentation: span -> Reading
outcome.py     outcome signals -> Verdict (ok, failed with a class, neutral, unknown)
listing.py     listing counts, checked
fingerprint.py server + tool + canonical arguments -> a short hash
redact.py      error texts scrubbed before they leave the process
classifier.py  pairing, de-duplication and identity; the entry point
events.py      what comes out: ToolCall, ToolListing
"""
