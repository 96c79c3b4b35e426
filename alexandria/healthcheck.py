"""`python -m alexandria.healthcheck ADDRESS`: exit 0 when the gRPC service there says SERVING.

Used by docker-compose health checks, so the images need no separate probe binary.
"""

from __future__ import annotations

import asyncio
import sys

from alexandria.clients import ServiceHealth, health_status


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m alexandria.healthcheck HOST:PORT")
    status = asyncio.run(health_status(sys.argv[1]))
    print(status)
    sys.exit(0 if status is ServiceHealth.SERVING else 1)


if __name__ == "__main__":
    main()
