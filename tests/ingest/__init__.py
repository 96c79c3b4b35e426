"""Tests of the ingest service's stages: extract, segment, chunk."""
