"""Admission: the `kai webhook` process, its handlers and its serving certificate.

Above `kai.api` (whose rules it applies) and `kai.kube` (plumbing); the scheduler
(`kai.operator`) does not depend on it and runs without it.
"""
