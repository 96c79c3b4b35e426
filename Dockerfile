# One image for every Alexandria service and the gateway; the command picks which.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1
WORKDIR /app

# CPU torch by default; GPU nodes build with --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install --index-url ${TORCH_INDEX} torch==2.13.0

COPY pyproject.toml README.md ./
COPY alexandria ./alexandria
COPY services ./services
COPY gateway ./gateway
COPY alexandria_stack ./alexandria_stack
COPY guardians ./guardians
RUN pip install .

CMD ["python", "-m", "services", "catalog"]
