"""The whole library on one machine, as it grows (`python -m bench.scale`; its __main__ says what it measures):
the bench collection and its exact search (collection), the stacks it runs (stack), its figures (figures)."""
