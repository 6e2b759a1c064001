"""A replica that does not lead cannot write: the client refuses before anything is sent."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.operator.leading import NOT_LEADING, LeaderOnlyKube, NotLeadingError

UNREACHABLE = "http://127.0.0.1:9"  # a request sent there fails to connect, not as NotLeading


async def test_every_write_is_refused_unsent_while_not_leading() -> None:
    configuration = Configuration()
    configuration.host = UNREACHABLE
    async with ApiClient(configuration) as client:
        kube = LeaderOnlyKube(client, lambda: False)
        writes = (
            kube.create("/api/v1/namespaces/ns/events", {}),
            kube.merge_patch("/api/v1/namespaces/ns/pods/p", {}),
            kube.delete("/api/v1/namespaces/ns/pods/p"),
            kube.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={}),
        )
        for write in writes:
            with pytest.raises(NotLeadingError) as refused:
                await write
            assert refused.value.reason == NOT_LEADING
            assert not refused.value.sent  # certainly not carried out
