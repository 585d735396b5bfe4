# kplm on a CUDA machine: PyTorch + DeepSpeed + kplm, for multi-GPU / multi-node pretraining.
#   docker build -t kplm .
#   docker run --gpus all --ipc=host -v "$PWD/runs:/work/runs" kplm \
#       deepspeed --num_gpus 8 /opt/kplm/launch/pretrain.py --config /work/runs/myrun/pretrain/pretrain.yaml
# The devel image carries nvcc, which DeepSpeed needs to build its fused CUDA ops (Adam, etc.) on first use.
FROM pytorch/pytorch:2.9.1-cuda12.8-cudnn9-devel

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_DISABLE_TELEMETRY=1

# g++ and ninja for DeepSpeed's JIT-compiled ops; openssh-client and pdsh for `deepspeed --hostfile` launches.
# Distribution package versions float with the base image, which is itself pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ ninja-build openssh-client pdsh git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/kplm
# Dependencies first (better layer caching): the base image's torch satisfies kplm's torch requirement.
COPY setup.cfg pyproject.toml README.md ./
COPY kplm ./kplm
COPY corpus ./corpus
COPY pii ./pii
COPY tokenizer ./tokenizer
COPY training ./training
COPY export ./export
COPY finetune ./finetune
COPY pipeline ./pipeline
COPY launch ./launch
RUN pip install -e . && python -c "import kplm.training, deepspeed, mecab_ko; print('kplm ok')"

WORKDIR /work
CMD ["kplm", "--help"]
