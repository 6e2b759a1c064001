"""The pure scheduling engine: a cluster snapshot in, decisions out; no I/O, no clock, no globals."""
