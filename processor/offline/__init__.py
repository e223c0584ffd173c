"""``mcp-breaker analyze``: the breaker over recorded traces, offline.

Not the in-flight stage hook (that is ``processor/inflight/pipeline.py``): this package reads trace
files and drives that same pipeline over them, as enforcing, then reports::

    read.py     files, directories, stdin -> OTLP records (JSON lines, proto, gzip, zstd)
    decode.py   records -> the spans the classifier reads, with their resource and scope
                (otlp_json.py: OTLP/JSON to protobuf, field by field)
    order.py    many files -> one stream in span-end order, with a bounded reorder buffer
    run.py      the stream -> Pipeline (classify, breaker, roster) per configuration
    enforce.py  the breaker as a harness that heeds it meets it: a refused call is not made
    tally.py    the pipeline's findings -> figures (turn_tally.py, roster_tally.py)
    report.py   the figures -> the json report; text.py and html.py (charts.py) show it
    sweep.py    --sweep: one analysis per setting, the trade-off table
    command.py  the command's flags, messages and exit codes
"""
