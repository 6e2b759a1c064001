"""structlog set up for the operator: one JSON object per line on stderr.

Each cycle binds a `cycle` id into the context, so every line a cycle logs
(binds, failures, status writes) can be found by it. Libraries that log through
the standard library (kopf's lifecycle, aiohttp) go to the same stream in the same
format, so one log shipper reads all of it.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info") -> None:
    number = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    logging.basicConfig(level=number, handlers=[handler], force=True)
    # Each kubelet probe would log two lines: kopf's probe handler and aiohttp's access log.
    for chatty in ("kopf.activities.probe", "aiohttp.access"):
        logging.getLogger(chatty).setLevel(max(number, logging.WARNING))
