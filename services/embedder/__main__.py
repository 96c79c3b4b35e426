"""`python -m services.embedder`: run the embedder service alone (see services/host.py)."""

import sys

from services.host import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    main(["embedder", *sys.argv[1:]])
