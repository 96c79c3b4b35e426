"""`python -m services NAME...`: run one or more services in one process (see services/host.py)."""

from services.host import main

if __name__ == "__main__":  # not when a spawned worker process (OCR) imports it
    main()
