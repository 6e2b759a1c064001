"""`kai webhook` serves admission; `kai webhook-certs -f manifests/webhook.yaml` makes its certificate.

`kai webhook [--port 9443] [--cert-file tls.crt --key-file tls.key] [--kubeconfig PATH]` runs
the admission webhook as a kopf operator until SIGINT or SIGTERM (`kai.admission.app`).
`kai webhook-certs` prints the given manifests back with a TLS Secret for the webhook's
Service and the CA in every webhook configuration (`kai.admission.certs`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from pathlib import Path

import yaml

from kai.cli.arguments import kubeconfig_file


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("webhook", help="serve the admission webhook")
    serve.add_argument(
        "--kubeconfig", type=kubeconfig_file, help="kubeconfig file (default: in-cluster)"
    )
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on")
    serve.add_argument("--port", type=int, default=9443)
    serve.add_argument("--cert-file", type=Path, help="serving certificate (PEM)")
    serve.add_argument("--key-file", type=Path, help="its private key (PEM)")
    serve.add_argument(
        "--liveness-endpoint",
        default="http://0.0.0.0:8081/healthz",
        help="where kopf serves the liveness probe ('' for none)",
    )
    serve.add_argument(
        "--runtime-class",
        default="nvidia",
        help="runtime class given to fractional-GPU pods that name none ('' for none)",
    )
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    serve.set_defaults(handler=run_webhook)

    certs = commands.add_parser(
        "webhook-certs", help="print webhook manifests with a serving certificate and caBundle"
    )
    certs.add_argument(
        "-f", "--filename", type=Path, required=True, help="manifests (manifests/webhook.yaml)"
    )
    certs.add_argument("--namespace", default="kai-scheduler", help="the webhook's namespace")
    certs.add_argument("--service", default="kai-webhook", help="the webhook's Service")
    certs.add_argument("--secret", default="kai-webhook-tls", help="the Secret to write")
    certs.add_argument("--days", type=int, default=365, help="validity of the certificate")
    certs.add_argument(
        "--failure-policy",
        choices=("Fail", "Ignore"),
        help="set every webhook's failurePolicy (default: as in the manifests, Fail)",
    )
    certs.set_defaults(handler=write_certs)


def run_webhook(args: argparse.Namespace) -> int:
    from kai.admission.app import WebhookConfig, run_webhook  # see kai/cli/main.py
    from kai.operator.logs import configure

    configure(args.log_level)
    config = WebhookConfig(
        kubeconfig=args.kubeconfig,
        host=args.host,
        port=args.port,
        cert_file=args.cert_file,
        key_file=args.key_file,
        liveness_endpoint=args.liveness_endpoint or None,
        runtime_class=args.runtime_class or None,
    )
    return asyncio.run(run_webhook(config))


def write_certs(args: argparse.Namespace) -> int:
    from kai.admission.certs import (  # see kai/cli/main.py
        service_hosts,
        tls_secret,
        webhook_certificate,
        with_ca_bundle,
    )

    try:
        documents = [doc for doc in yaml.safe_load_all(args.filename.read_text()) if doc]
    except (OSError, yaml.YAMLError) as error:
        print(f"kai webhook-certs: {args.filename}: {error}", file=sys.stderr)
        return 2
    certificate = webhook_certificate(
        service_hosts(args.service, args.namespace), datetime.timedelta(days=args.days)
    )
    out = [tls_secret(args.secret, args.namespace, certificate)]
    out += with_ca_bundle(documents, certificate.ca, args.failure_policy)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0
