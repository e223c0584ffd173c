"""Who may send and subscribe: bearer tokens (``tokens.py``) and TLS, mutual TLS included
(``tls.py``)."""
