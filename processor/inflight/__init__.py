"""The in-flight path between the receivers and the forwarder: the stage opens a request
and keeps it as bytes where it can (``stage.py``), the pipeline runs classify, the breaker
and roster health over its MCP spans (``pipeline.py``), the verdicts are written onto the
spans (``enrich.py``) and what must not go on is removed (``strip.py``).

    receive/  ->  inflight/ stage -> pipeline -> enrich, strip  ->  forward/
"""
