"""`python -m services.catalog`: run the catalog service alone (see services/host.py)."""

from services.host import main

main(["catalog"])
