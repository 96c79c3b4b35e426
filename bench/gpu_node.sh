#!/usr/bin/env bash
# bench/gpu.py on a bare GPU node: install the wheels carried with the tree (.whl/, bench/README.md says which
# and how to download them), check that the embedder's modules import, then run the check with the arguments
# given. Wheels go to /tmp/site, which stays while the node does: a later call on the same node needs no .whl.
#
#   bash bench/gpu_node.sh [--install-only] [bench.gpu's arguments ...]
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=/tmp/site
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The embedder's own imports, and the versions that matter, before minutes are spent loading models.
python3 - <<'PY'
import importlib, sys
missing = []
for module in ("pydantic", "pydantic_settings", "grpc", "grpc_health", "grpc_reflection", "google.protobuf",
               "tenacity", "pycountry", "sentence_transformers", "torch", "services.embedder.server", "bench.gpu"):
    try:
        importlib.import_module(module)
    except Exception as exc:  # an import that fails for any reason stops the check here, named
        missing.append(f"{module}: {type(exc).__name__}: {exc}")
if missing:
    sys.exit("bench/gpu_node.sh: these do not import; carry their wheels in .whl/ (bench/README.md):\n  "
             + "\n  ".join(missing))
import grpc, sentence_transformers, torch
print(f"gpu_node: torch {torch.__version__} (CUDA {torch.version.cuda}, GPU {torch.cuda.is_available()}), "
      f"sentence-transformers {sentence_transformers.__version__}, grpcio {grpc.__version__}")
PY
if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi
export HF_HUB_OFFLINE=1
exec python3 -m bench.gpu "$@"
