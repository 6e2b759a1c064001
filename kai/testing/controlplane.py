"""A real, local Kubernetes control plane for tests and development.

Starts upstream etcd, kube-apiserver and kube-controller-manager (built by
``tests/controlplane/build.sh``) on free loopback ports with fresh certificates,
installs every CRD in ``crds/``, and on stop removes every process and file it
made, also when a test fails or the run is interrupted. No kubelet runs: pods
that get bound stay Pending until a test sets their phase.

As a development cluster::

    python -m kai.testing.controlplane up      # prints the kubeconfig; Ctrl-C stops
    python -m kai.testing.controlplane check   # start, report the times, stop
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType

import yaml

from kai.testing.binaries import (
    Binaries,
    BinariesMissingError,
    default_repo_root,
    locate_binaries,
)
from kai.testing.certs import Pki, write_pki
from kai.testing.kubeconfig import certificate_user, write_kubeconfig
from kai.testing.processes import Child, free_loopback_port
from kai.testing.rest import RestClient
from kai.testing.workdir import make_workdir

# No nodelifecycle: without kubelets it would taint every node NotReady.
CONTROLLERS = (
    "job-controller",
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "persistentvolume-binder-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
)
_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_POLL_SECONDS = 0.05
_STOP_GRACE_SECONDS = 10.0


class StartupError(RuntimeError):
    """A component did not come up; the message carries its log's tail."""


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach a running control plane."""

    server: str
    kubeconfig: Path
    ca_cert: Path
    workdir: Path


@dataclass
class StartupTimes:
    """Seconds from the start call until each milestone, for reports."""

    marks: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in self.marks.items())


def _sigterm_as_interrupt(_signum: int, _frame: FrameType | None) -> None:
    # Python's default for SIGTERM is to die without cleanup; an interrupt lets
    # pytest and ``with`` blocks run their teardown, which stops the children.
    raise KeyboardInterrupt


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in a temporary folder."""

    def __init__(self, binaries: Binaries, crd_dir: Path) -> None:
        self._binaries = binaries
        self._crd_dir = crd_dir
        self._children: list[Child] = []
        self._workdir: Path | None = None
        self._handles_sigterm = False
        self._apiserver: tuple[Child, list[str], RestClient] | None = None
        """The running kube-apiserver, its argv and a client, for `restart_apiserver`."""
        self.times = StartupTimes()

    def __enter__(self) -> ClusterAccess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ClusterAccess:
        """Start everything and return once the cluster serves kai's CRDs."""
        if self._workdir is not None:
            raise RuntimeError("control plane already started")
        self._guard_against_abrupt_exit()
        self._workdir = make_workdir()
        try:
            return self._start(self._workdir)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components (newest first) and delete the temporary folder."""
        while self._children:
            self._children.pop().stop(_STOP_GRACE_SECONDS)
        self._apiserver = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        atexit.unregister(self.stop)
        if self._handles_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self._handles_sigterm = False

    def _guard_against_abrupt_exit(self) -> None:
        atexit.register(self.stop)
        on_main_thread = threading.current_thread() is threading.main_thread()
        if on_main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
            self._handles_sigterm = True

    def _start(self, workdir: Path) -> ClusterAccess:
        began = time.monotonic()

        def mark(name: str) -> None:
            self.times.marks[name] = time.monotonic() - began

        pki = write_pki(workdir / "pki")
        etcd_url = self._start_etcd(workdir)
        mark("etcd")
        server = f"https://127.0.0.1:{free_loopback_port()}"
        apiserver_argv = self._apiserver_argv(pki, etcd_url, server)
        apiserver = self._spawn("kube-apiserver", apiserver_argv)
        rest = RestClient(server, str(pki.ca.cert), pki.admin)
        self._apiserver = (apiserver, apiserver_argv, rest)
        self._wait("kube-apiserver /readyz", lambda: _ok(rest, "/readyz"), 60, [apiserver])
        mark("kube-apiserver")
        kubeconfig = write_kubeconfig(
            workdir / "admin.kubeconfig", server, pki.ca.cert, certificate_user(pki.admin)
        )
        manager_config = write_kubeconfig(
            workdir / "controller-manager.kubeconfig",
            server,
            pki.ca.cert,
            certificate_user(pki.controller_manager),
        )
        manager = self._spawn("kube-controller-manager", self._manager_argv(pki, manager_config))
        crds = self._install_crds(rest)
        self._wait(
            "CRDs Established",
            lambda: all(_established(rest, name) for name in crds),
            30,
            [apiserver, manager],
        )
        mark("crds")
        # The serviceaccount controller fills in each namespace's "default"
        # account, which pods need before the API server admits them.
        self._wait(
            "kube-controller-manager (default ServiceAccount)",
            lambda: _ok(rest, "/api/v1/namespaces/default/serviceaccounts/default"),
            30,
            [apiserver, manager],
        )
        mark("kube-controller-manager")
        return ClusterAccess(
            server=server, kubeconfig=kubeconfig, ca_cert=pki.ca.cert, workdir=workdir
        )

    def restart_apiserver(self, timeout: float = 120) -> None:
        """Kill kube-apiserver (SIGKILL) and start it again on the same port and etcd.

        For fault tests: every client connection breaks and every watch ends, while
        the cluster's state survives in etcd. Returns once the new one is ready.
        """
        if self._apiserver is None:
            raise RuntimeError("control plane not started")
        old, argv, rest = self._apiserver
        old.stop(grace_seconds=0)
        self._children.remove(old)
        fresh = self._spawn("kube-apiserver", argv)
        self._apiserver = (fresh, argv, rest)
        self._wait(
            "restarted kube-apiserver /readyz", lambda: _ok(rest, "/readyz"), timeout, [fresh]
        )

    def _spawn(self, name: str, argv: Sequence[str]) -> Child:
        assert self._workdir is not None
        child = Child(name, argv, self._workdir / f"{name}.log")
        self._children.append(child)
        return child

    def _start_etcd(self, workdir: Path) -> str:
        client_url = f"http://127.0.0.1:{free_loopback_port()}"
        peer_url = f"http://127.0.0.1:{free_loopback_port()}"
        etcd = self._spawn(
            "etcd",
            [
                str(self._binaries.etcd),
                "--name=kai-test",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kai-test={peer_url}",
                # Throw-away data: skipping fsync makes every write much faster.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait("etcd /health", lambda: _etcd_healthy(client_url), 20, [etcd])
        return client_url

    def _apiserver_argv(self, pki: Pki, etcd_url: str, server: str) -> list[str]:
        port = server.rsplit(":", 1)[1]
        return [
            str(self._binaries.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            # Only allocated from, never routed: the cluster has no network.
            "--service-cluster-ip-range=10.96.0.0/24",
            # That plugin taints new nodes NotReady; the node lifecycle
            # controller would lift the taint, but it does not run here.
            "--disable-admission-plugins=TaintNodesByCondition",
            "--profiling=false",
        ]

    def _manager_argv(self, pki: Pki, kubeconfig: Path) -> list[str]:
        return [
            str(self._binaries.kube_controller_manager),
            f"--kubeconfig={kubeconfig}",
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            "--leader-elect=false",
            "--secure-port=0",
            "--profiling=false",
        ]

    def _install_crds(self, rest: RestClient) -> list[str]:
        names: list[str] = []
        for path in sorted(self._crd_dir.glob("*.yaml")):
            for crd in yaml.safe_load_all(path.read_text()):
                if not crd:
                    continue
                response = rest.request("POST", _CRD_PATH, crd)
                if response.status != 201:
                    raise StartupError(
                        f"installing {path.name} failed ({response.status}): {response.body}"
                    )
                names.append(crd["metadata"]["name"])
        return names

    def _wait(
        self, what: str, ready: Callable[[], bool], timeout: float, watched: Sequence[Child]
    ) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for child in watched:
                code = child.exit_code()
                if code is not None:
                    raise StartupError(
                        f"{child.name} exited with {code} while waiting for {what}; "
                        f"its log ({child.log}) ends:\n{child.log_tail()}"
                    )
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {c.name}:\n{c.log_tail()}" for c in watched)
                raise StartupError(f"no {what} after {timeout:.0f}s\n{tails}")
            time.sleep(_POLL_SECONDS)


def _ok(rest: RestClient, path: str) -> bool:
    try:
        return rest.request("GET", path, timeout=2).status == 200
    except OSError:
        return False


def _etcd_healthy(client_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{client_url}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _established(rest: RestClient, name: str) -> bool:
    response = rest.request("GET", f"{_CRD_PATH}/{name}")
    if response.status != 200:
        return False
    conditions = (response.body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _up(plane: ControlPlane) -> None:
    with plane as access:
        print(f"control plane ready in {plane.times}", file=sys.stderr)
        print(f"export KUBECONFIG={access.kubeconfig}")
        print("Ctrl-C stops it and deletes its files.", file=sys.stderr, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping", file=sys.stderr)


def _check(plane: ControlPlane) -> None:
    began = time.monotonic()
    with plane as access:
        print(f"started {access.server}: {plane.times}")
    print(f"stopped; start + stop took {time.monotonic() - began:.2f}s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kai.testing.controlplane",
        description="Run a local Kubernetes control plane with kai's CRDs installed.",
    )
    parser.add_argument("command", choices=["up", "check"])
    parser.add_argument(
        "--repo", type=Path, default=default_repo_root(), help="kai checkout (default: this one)"
    )
    args = parser.parse_args(argv)
    try:
        binaries = locate_binaries(args.repo)
    except BinariesMissingError as err:
        print(err, file=sys.stderr)
        return 2
    plane = ControlPlane(binaries, args.repo / "crds")
    if args.command == "up":
        _up(plane)
    else:
        _check(plane)
    return 0


if __name__ == "__main__":
    sys.exit(main())
