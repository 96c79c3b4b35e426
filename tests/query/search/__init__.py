"""The searcher against the real embedded store, by theme; library.py is the small library they search."""
