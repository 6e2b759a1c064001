"""The CP-SAT formulation of one allocation cycle: node classes, placement patterns, the model and its decoding."""
