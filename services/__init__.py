"""Alexandria's gRPC services: catalog, embedder, ingest, query (one package each).

`python -m services NAME [NAME...]` runs several in one process (see services/host.py).
"""
