"""`python -m services.catalog`: run the catalog service alone (see services/host.py)."""

import sys

from services.host import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    main(["catalog", *sys.argv[1:]])
