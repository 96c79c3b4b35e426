"""Tests of the query service."""
