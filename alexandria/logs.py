"""Logging for every process: stderr only, each line tagged with the service name.

stdout belongs to MCP's stdio transport, so nothing here ever writes to it.
"""

from __future__ import annotations

import logging
import sys


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send all log records to stderr as `time service LEVEL logger: message`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "urllib3", "sentence_transformers", "transformers", "filelock"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
