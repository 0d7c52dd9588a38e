"""``eagle3lab bench``: measure a server you run (``--base-url``), or EAGLE-3 against plain decoding on two
servers you run (``--baseline-url``: an interleaved A/B with a bootstrap interval and the lossless check). The
JSON it writes feeds ``eagle3lab doctor --bench`` directly (``bench.remote``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional

from eagle3lab.bench import remote
from eagle3lab.bench.workload import SweepConfig, model_vocab_size, special_id_floor
from eagle3lab.errors import BenchError

DATASETS = {"random-ids": "ids", "random-text": "text", "sharegpt": "sharegpt", "chat": "chat"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", required=True, help="the server to measure (the speculative one in an A/B), "
                                                          "e.g. http://127.0.0.1:30000")
    parser.add_argument("--baseline-url", help="a plain server of the same model: interleaved A/B against it")
    parser.add_argument("--concurrency", default="1", help="concurrency levels, comma-separated (default 1)")
    parser.add_argument("--request-rate", type=float, help="requests/s arriving as a Poisson process, at most the "
                                                           "concurrency in flight (default: closed loop)")
    parser.add_argument("--num-prompts", type=int, default=16, help="measured prompts per concurrency (per arm)")
    parser.add_argument("--input-len", type=int, default=256, help="prompt tokens (random datasets)")
    parser.add_argument("--output-len", type=int, default=128, help="output tokens per request (ignore_eos)")
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="random-ids",
                        help="random-ids, random-text (needs --tokenizer), sharegpt (--dataset-path), chat (the "
                             "bundled questions in the model's chat template; needs --tokenizer)")
    parser.add_argument("--dataset-path", help="a ShareGPT-format JSON file")
    parser.add_argument("--tokenizer", help="the model's folder (its tokenizer and config.json)")
    parser.add_argument("--vocab-size", type=int, help="token ids are drawn below this (default: the model's)")
    parser.add_argument("--rounds", type=int, default=6, help="A/B: blocks per arm and concurrency (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="prompt stream seed (same prompts for every arm)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default greedy)")
    parser.add_argument("--out", default="eagle3lab-bench", help="output folder (JSON, CSV, per-request JSONL)")
    parser.add_argument("--json", action="store_true", help="print the result JSON instead of a summary")


def _levels(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BenchError(f"--concurrency expects integers such as 1 or 1,4,16, got '{text}'") from None
    if not values or min(values) < 1:
        raise BenchError(f"--concurrency needs values >= 1, got '{text}'")
    return values


def _vocab(args: argparse.Namespace, info: dict[str, Any]) -> tuple[int, Optional[int], Optional[str]]:
    """(vocab size, first special id above the low ids, tokenizer folder): --vocab-size, else the model's
    config.json (--tokenizer, or the server's model path where it is a folder on this machine)."""
    folder = args.tokenizer or (info.get("tokenizer_path") or info.get("model_path"))
    local = folder if folder and (Path(folder) / "config.json").is_file() else None
    if args.vocab_size:
        return args.vocab_size, special_id_floor(local) if local else None, local
    if local is None:
        raise BenchError("random token ids need the vocabulary size: give --vocab-size or --tokenizer (the model "
                         "folder)", key="vocab_size", problem="missing")
    return model_vocab_size(local), special_id_floor(local), local


def config_from_args(args: argparse.Namespace, info: dict[str, Any]) -> SweepConfig:
    kind = DATASETS[args.dataset]
    vocab, high, folder = (0, None, args.tokenizer) if kind == "sharegpt" else _vocab(args, info)
    extra = {"temperature": args.temperature} if args.temperature else {}
    return SweepConfig(concurrency=_levels(args.concurrency), input_len=args.input_len, output_len=args.output_len,
                       num_prompts=args.num_prompts, seed=args.seed, prompt_kind=kind,  # type: ignore[arg-type]
                       vocab_size=vocab or 1024, token_id_high=min(high, vocab) if high and vocab else None,
                       tokenizer_dir=folder, dataset_path=args.dataset_path, request_rate=args.request_rate,
                       extra_sampling_params=extra)


def run(args: argparse.Namespace) -> None:
    if args.rounds < 1 or args.num_prompts < 1:
        raise BenchError("--rounds and --num-prompts need values >= 1")
    _levels(args.concurrency)  # bad arguments are refused before any server is asked
    if args.dataset == "sharegpt" and not args.dataset_path:
        raise BenchError("--dataset sharegpt needs --dataset-path (a ShareGPT-format JSON file)")
    info = remote.server_info(args.base_url)
    config = config_from_args(args, info)
    out = Path(args.out)
    dataset = args.dataset if args.dataset != "sharegpt" else f"sharegpt ({args.dataset_path})"
    chat = args.dataset == "chat"
    if args.baseline_url:
        result = remote.run_pair(args.base_url, args.baseline_url, config, out, args.rounds, args.num_prompts, dataset,
                                 chat)
    else:
        result = remote.run_single(args.base_url, config, out, dataset, chat)
    json_path, csv_path = remote.write_outputs(result, out)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    print("\n".join(remote.summary(result)))
    print(f"wrote {json_path} and {csv_path}; give {json_path} to `eagle3lab doctor --bench`")
