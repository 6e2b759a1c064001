"""KAI's eviction actions after allocation: consolidation, reclaim, preempt and stale-gang eviction.

Each pending gang the allocation pass could not place may take room from running
work, but only as KAI's rules allow (kai-semantics §8, §10.7, §11). The victims are
chosen by a CP-SAT model that minimises disruption, with KAI's greedy victim search
as its warm start, its fallback and the benchmark's baseline; every choice is checked
against the rules before it is committed. Gangs placed on capacity still being freed
wait as a whole (pipelined); they are never half-bound.
"""
