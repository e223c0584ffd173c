"""What a harness and the service must compute alike, so that both judge a call the same
way; the service (mcp-breaker) imports these from here.

verdict.py       how a call ended: Outcome, FailureClass, FailureOrigin, NeutralReason, Verdict
outcome.py       from the signals a call left to its Verdict (judge)
result.py        a tool's result read the same way wherever it was recorded
fingerprint.py   the fingerprint of server, tool and arguments
redact.py        secrets and paths out of error texts before a model or a log sees them
redact_patterns.py  its patterns: credential shapes, key words, separators, the markers
redact_prose.py  its rule for what follows a credential word in prose, any language
secret_words.py  the words that mark a secret, in eleven languages (data for redact.py)
messages.py      every sentence a model reads of a refusal
turns.py         within a turn: TurnKey, the tool-wide failure classes, a turn block's words
conventions.py   the span attributes a harness writes, and the server__tool name convention
cheap_dataclasses.py  constructors for the dataclasses built once per call
"""
