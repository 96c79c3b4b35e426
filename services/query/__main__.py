"""`python -m services.query`: run the query service alone (see services/host.py)."""

from services.host import main

main(["query"])
