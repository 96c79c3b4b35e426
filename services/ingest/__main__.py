"""`python -m services.ingest`: run the ingest service alone (see services/host.py)."""

import sys

from services.host import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    main(["ingest", *sys.argv[1:]])
