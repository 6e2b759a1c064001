"""Test support for kai: a real Kubernetes control plane and fake GPU nodes.

The integration tests run the scheduler against upstream kube-apiserver, etcd and
kube-controller-manager (built by ``tests/controlplane/build.sh``) instead of
mocks, so what passes here passes against a cluster. Start with
:mod:`kai.testing.controlplane`.
"""
