"""Alexandria's shared kernel: settings, logging, errors, the gRPC service shape, clients and the store."""
