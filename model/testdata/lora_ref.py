"""Reference LoRA forward and gradients for drmas's parity test (TestLoRATorchParity).

Uses qwen_ref.py's decoder with every adapted weight replaced by W + scale * B @ A, A and B
leaf tensors with requires_grad: without dropout this is PEFT's forward
base(x) + scale * (x @ A.T) @ B.T exactly (in real arithmetic), and autograd gives dA and dB
independently of drmas's hand-written backward. Computed in float64.

usage: lora_ref.py JOBS.json, JOBS.json = [[IN.json, WEIGHTS.safetensors, ADAPTER.safetensors, OUT.safetensors], ...]

IN.json: as qwen_ref.py's, plus "lora": {"r": R, "alpha": ALPHA}.
ADAPTER.safetensors: PEFT names, base_model.model.<module>.lora_A.weight [r, in] and
.lora_B.weight [out, r].
OUT.safetensors: "logprob.<i>", "entropy.<i>" per sequence and "grad.<adapter tensor name>".
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen_ref import backward_weighted, read_safetensors, write_safetensors  # noqa: E402

PREFIX = "base_model.model."


def run(in_path, weights_path, adapter_path, out_path):
    spec = json.load(open(in_path))
    dtype = torch.float64
    cfg = spec["config"]
    scale = spec["lora"]["alpha"] / spec["lora"]["r"]
    W = {n: t.to(dtype) for n, t in read_safetensors(weights_path).items()}
    AB = {n: t.to(dtype).requires_grad_(True) for n, t in read_safetensors(adapter_path).items()}
    modules = sorted({n[len(PREFIX) :].rsplit(".lora_", 1)[0] for n in AB})
    for mod in modules:
        a = AB[PREFIX + mod + ".lora_A.weight"]
        b = AB[PREFIX + mod + ".lora_B.weight"]
        W[mod + ".weight"] = W[mod + ".weight"] + scale * (b @ a)
    out = backward_weighted(spec, cfg, W, dtype)
    for n, t in AB.items():
        out["grad." + n] = t.grad
    write_safetensors(out_path, out)


def main():
    for job in json.load(open(sys.argv[1])):
        run(*job)


if __name__ == "__main__":
    main()
