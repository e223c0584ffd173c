"""Delivery to the next hop: a bounded queue, a retry policy as data, and the senders."""
