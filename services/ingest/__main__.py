"""`python -m services.ingest`: run the ingest service alone (see services/host.py)."""

from services.host import main

main(["ingest"])
