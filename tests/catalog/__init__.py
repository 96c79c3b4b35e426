"""Tests of the catalog service."""
