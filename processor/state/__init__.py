"""Shared state: the engines' inputs replicated through one Redis Stream (``replica.py``)."""
