"""Stack figures: cold start of the whole stack, RSS of each process at idle, trivial RPC round trip.

    .venv/bin/python -m bench.stack

Starts `alexandria up` on a scratch data directory (embedded store, the sample library),
then measures. The trivial RPC is a gRPC health Check over the unix socket the stack
uses, median of 1000, next to the same call to an in-process server on the same kind
of socket as the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from alexandria.grpc_server import build_server
from alexandria_stack.layout import SAMPLE_LIBRARY, StackLayout
from bench.common import CALIBRE_LIBRARY, rss_mb
from tests.e2e.stack import start_stack

CALLS = 1000


async def health_rtt_ms(address: str) -> list[float]:
    async with aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="")
        await stub.Check(request)
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            await stub.Check(request)
            times.append((time.perf_counter() - start) * 1000)
    return times


async def baseline_rtt_ms(socket_dir: Path) -> list[float]:
    server = build_server("baseline", f"unix://{socket_dir / 'baseline.sock'}", lambda s: None, [])
    await server.server.start()
    await server.health.set_serving(True)
    try:
        return await health_rtt_ms(server.address)
    finally:
        await server.server.stop(0)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    with tempfile.TemporaryDirectory(prefix="alexandria-bench-") as scratch:
        data_dir = Path(scratch) / "var"
        started = time.perf_counter()
        stack = start_stack(data_dir, CALIBRE_LIBRARY if CALIBRE_LIBRARY.is_dir() else SAMPLE_LIBRARY)
        cold_start_s = time.perf_counter() - started
        try:
            time.sleep(2)  # let start-up allocations settle before reading RSS at idle
            rss = {command.split(" -m ", 1)[-1]: rss_mb(pid) for pid, command in stack.children().items()}
            rss["launcher"] = rss_mb(stack.process.pid)
            layout = StackLayout(data_dir)
            stack_rtt = asyncio.run(health_rtt_ms(layout.socket("query")))
            base_rtt = asyncio.run(baseline_rtt_ms(Path(scratch)))
        finally:
            stack.stop()
    p50 = statistics.median(stack_rtt)
    base = statistics.median(base_rtt)
    print(f"{'figure':<44} {'value':>10}")
    print(f"{'cold start, whole stack (s)':<44} {cold_start_s:>10.2f}")
    for name, mb in rss.items():
        print(f"{'RSS idle: ' + name[:34]:<44} {mb:>8.0f} MB")
    print(f"{'trivial RPC p50, query service (ms)':<44} {p50:>10.3f}")
    print(f"{'trivial RPC p50, bare in-process server (ms)':<44} {base:>10.3f}")
    print(json.dumps({
        "cold_start_s": round(cold_start_s, 2),
        "rss_mb": {k: round(v) for k, v in rss.items()},
        "rpc_p50_ms": round(p50, 3),
        "rpc_p50_ms_baseline": round(base, 3),
        "ratio": round(p50 / base, 2),
        "transport": "unix socket",
    }))


if __name__ == "__main__":
    main()
