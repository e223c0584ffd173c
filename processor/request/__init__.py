"""OTLP request bytes: the shallow protobuf reading the hot path lives on (``sparse.py``),
the OTLP message helpers (``otlp.py``), and who sent a request (``sender.py``)."""
