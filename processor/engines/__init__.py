"""The engines: pure state machines over normalized events, with the clock passed in.

circuit.py  across turns: one circuit per tool and per server (closed, open, half-open,
            forced open, forced closed), transitions as data
turns.py    within a turn: after a failure, a repeat is a dead call
breaker.py  both together: a decision per call, with its evidence and message
"""
