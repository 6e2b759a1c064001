"""Generic Kubernetes plumbing, with no scheduler logic: the JSON client, informers and
their cache, the Lease, bounded writes and the owner reader.

Nothing here imports from the rest of kai; `kai.operator` builds the scheduler on it.
"""
