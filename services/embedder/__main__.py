"""`python -m services.embedder`: run the embedder service alone (see services/host.py)."""

from services.host import main

main(["embedder"])
