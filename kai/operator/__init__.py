"""The live scheduler behind `kai run`: watch cache, pod grouper, scheduling loop, binder.

`kai.operator.app.run_operator` assembles the parts; each module holds one concern
(see docs/operator.md for the map).
"""
