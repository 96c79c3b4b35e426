"""embedder

Models are never downloaded: huggingface_hub reads HF_HUB_OFFLINE once, when it is first
imported, so it is set here, before any embedder module imports it. Loading also passes
`local_files_only`, in case something imported the hub earlier.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
