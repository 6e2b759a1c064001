"""kopf logs in with the credentials kubernetes-asyncio reads from the same kubeconfig."""

from __future__ import annotations

from pathlib import Path

import yaml

from kai.kube.kopf_process import connection_info


def _kubeconfig(path: Path, user: dict[str, str], cluster: dict[str, object]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def test_a_token_becomes_a_bearer_scheme_and_token(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("not read until a request is made")
    config = _kubeconfig(
        tmp_path / "config",
        {"token": "s3cret"},
        {"server": "https://10.0.0.1:6443", "certificate-authority": str(ca)},
    )
    info = await connection_info(config)
    assert info.server == "https://10.0.0.1:6443"
    assert (info.scheme, info.token) == ("Bearer", "s3cret")
    assert info.ca_path == str(ca)
    assert info.insecure is False
    assert info.certificate_path is None and info.private_key_path is None


async def test_client_certificates_and_skip_verify_carry_over(tmp_path: Path) -> None:
    cert, key = tmp_path / "u.crt", tmp_path / "u.key"
    cert.write_text("cert")
    key.write_text("key")
    config = _kubeconfig(
        tmp_path / "config",
        {"client-certificate": str(cert), "client-key": str(key)},
        {"server": "https://example.test", "insecure-skip-tls-verify": True},
    )
    info = await connection_info(config)
    assert info.certificate_path == str(cert)
    assert info.private_key_path == str(key)
    assert info.insecure is True
    assert info.token is None and info.scheme is None
