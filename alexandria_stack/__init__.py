"""What composes Alexandria's processes into one stack on this machine: the launcher (`alexandria up`), the
terminal commands (`alexandria`) and where a local stack's pieces live.

It sits above `services/` and `gateway/` (it starts them and talks to them), as `main()` sits above
everything; the kernel (`alexandria/`) imports nothing from here.
"""
