"""`python -m alexandria_stack ...`: the `alexandria` command, where its script is not on the PATH (a container)."""

from alexandria_stack.entry import main

main()
