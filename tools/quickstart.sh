#!/usr/bin/env bash
# The README's first command: install what is needed, build, train a small byte-level MoE on
# real English text for a few minutes on the CPU, then sample from it.
#   bash tools/quickstart.sh [TEXT_FILE]
# Without TEXT_FILE it uses ../shared/data/tinyshakespeare.txt when present, else the
# `fortunes` Debian package's corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target moetrain_cli

DATA=${1:-}
if [ -z "$DATA" ]; then
  if [ -f ../shared/data/tinyshakespeare.txt ]; then
    DATA=../shared/data/tinyshakespeare.txt
  else
    dpkg-query -W -f='${Status}' fortunes 2>/dev/null | grep -q "install ok installed" || {
      SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
      $SUDO apt-get install -y -qq fortunes >/dev/null; }
    mkdir -p runs
    find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' \
      -exec cat {} + | grep -v '^%$' > runs/fortunes.txt
    DATA=runs/fortunes.txt
  fi
fi
echo "moetrain quickstart: training on $DATA"
STEPS=${STEPS:-300}
./build/moetrain train --device cpu --config examples/configs/shakespeare-moe.json \
  --data "$DATA" --steps "$STEPS" --batch 16 --seq 128 --lr 3e-3 --warmup 30 \
  --eval-every 50 --eval-batches 20 --save-every 100 --out runs/quickstart \
  --log-json runs/quickstart/log.jsonl --tensorboard runs/quickstart/tb
./build/moetrain eval --checkpoint runs/quickstart --data "$DATA" --batch 16 --seq 128 --batches 20
./build/moetrain generate --checkpoint runs/quickstart --prompt "ROMEO:" --max-new 500 \
  --temperature 0.8 --top-k 40 --seed 1
./build/moetrain report runs/quickstart --out runs/quickstart/report.html
echo "moetrain quickstart: plots in runs/quickstart/report.html;" \
  "TensorBoard: tensorboard --logdir runs/quickstart/tb"
