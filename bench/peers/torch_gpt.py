#!/usr/bin/python3
"""PyTorch peer of shardline's GPT (model.gpt; docs/models.md): the same
architecture with nanoGPT's module names, so shardline's safetensors export
loads with load_state_dict.

  torch_gpt.py check --ref DIR --metrics WORKDIR/metrics.jsonl
  torch_gpt.py fixture --out tests/fixtures/gpt_torch                 # ctest's reference
  torch_gpt.py train --train train.txt --val val.txt [--steps S ...]   # 1 process
  torchrun --nproc_per_node=2 torch_gpt.py train ...                  # DDP (gloo)

DIR is what shardline-gpt-reference wrote (the initial parameters exactly as
`shardline train` makes them, the first steps' batches as its pipeline draws
them, and shardline's logits of the first batch). The check:
  1. loads init.safetensors and compares its logits of the first batch with
     shardline's (the largest difference over the largest logit, goal 1e-4);
  2. trains from the same weights on the same batches with AdamW (torch's,
     weight decay on 2-D parameters as shardline does), the lr of each step
     read from shardline's metrics.jsonl (train.log_every=1), gradient
     clipping at grad_clip_norm, and compares each step's loss with
     shardline's (goal 1e-3 relative).
Prints one JSON line with the errors; exits 1 past the goals.

`train` is the speed peer: austen_gpt's config (the defaults below), AdamW
with shardline's warmup + cosine schedule and clipping. With --ref DIR (what
shardline-gpt-reference wrote for --steps S) it starts from shardline's
initial parameters and trains on shardline's batches, so both see the same
tokens in the same order; without, from GPT-2's initialisation on random
windows of the training text (the distribution shardline's per-epoch
permutation visits). Under DDP each rank takes its slice of every global
batch. It prints an eval line
(validation loss and bits per byte over windows tiling the validation file,
as shardline's are) every --eval_every steps and at the end, with the
training seconds so far, then a summary with tokens/s.
"""
import argparse, json, math, os, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

from torch_cnn import load_safetensors


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, causal=True):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Mlp(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads, mlp_ratio, causal=True):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, causal)
        self.mlp = Mlp(d, mlp_ratio * d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, context, layers, d_model, heads, mlp_ratio, vocab=256):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d_model), wpe=nn.Embedding(context, d_model),
            h=nn.ModuleList([Block(d_model, heads, mlp_ratio) for _ in range(layers)]),
            ln_f=nn.LayerNorm(d_model)))
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.transformer.wte(tokens) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def load_gpt(meta, safetensors):
    model = GPT(meta["context"], meta["layers"], meta["d_model"], meta["heads"], meta["mlp_ratio"])
    state = load_safetensors(safetensors)
    state["lm_head.weight"] = state["transformer.wte.weight"]
    model.load_state_dict(state)
    return model


def check(args):
    torch.set_num_threads(1)
    meta = json.load(open(f"{args.ref}/meta.json"))
    b, t, steps = meta["batch"], meta["context"], meta["steps"]
    batches = np.fromfile(f"{args.ref}/batches.bin", dtype=np.int32).reshape(steps, 2, b, t)
    model = load_gpt(meta, f"{args.ref}/init.safetensors")
    # 1. Logits of the first batch at initialisation.
    theirs = torch.from_numpy(np.fromfile(f"{args.ref}/logits.bin", dtype=np.float32).reshape(b * t, 256))
    with torch.no_grad(), autocast(args.autocast):
        ours = model(torch.from_numpy(batches[0, 0]).long()).float().reshape(b * t, 256)
    # Relative to the largest logit: a logit near zero has no relative error to speak of.
    logits_rel = float((ours - theirs).abs().max() / theirs.abs().max())
    # 2. The first steps' losses.
    lines = [json.loads(l) for l in open(args.metrics)]
    train = {int(l["step"]): l for l in lines if l.get("split") == "train"}
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": meta["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1.0, betas=(meta["b1"], meta["b2"]), eps=meta["eps"])
    loss_rel, pairs = 0.0, []
    for s in range(steps):
        if s + 1 not in train:
            sys.exit(f"{args.metrics} has no train line for step {s + 1}: run with train.log_every=1")
        tokens, targets = (torch.from_numpy(batches[s, i]).long() for i in (0, 1))
        with autocast(args.autocast):
            loss = F.cross_entropy(model(tokens).reshape(-1, 256), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if meta["grad_clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), meta["grad_clip_norm"])
        for group in opt.param_groups:
            group["lr"] = float(train[s + 1]["lr"])
        opt.step()
        theirs_loss = float(train[s + 1]["loss"])
        pairs.append((round(loss.item(), 6), theirs_loss))
        loss_rel = max(loss_rel, abs(loss.item() - theirs_loss) / abs(theirs_loss))
    # bfloat16 products on both sides round differently (oneDNN's blocking
    # against PyTorch's, PyTorch's bfloat16 activations between ops): the
    # goals are bfloat16's (issue 47), float32's otherwise.
    logits_goal, loss_goal = (1e-2, 1e-2) if args.autocast else (1e-4, 1e-3)
    ok = logits_rel <= logits_goal and loss_rel <= loss_goal
    print(json.dumps({"logits_max_rel_error": logits_rel, "loss_max_rel_error": loss_rel, "steps": steps,
                      "autocast": args.autocast, "losses_torch_shardline": pairs, "ok": ok}))
    return 0 if ok else 1


def gpt2_init(model, layers):
    """GPT-2's: normal(0.02) weights, zero biases, residual projections / sqrt(2 L)."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif "ln" in name:
            nn.init.ones_(p)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
            nn.init.normal_(p, 0.0, std)


def cosine(base, warmup, total, end_ratio=0.0):
    """shardline's LrSchedule (worker/optim/lr_schedule.cc), COSINE."""
    def lr_at(step):
        if step < warmup:
            return base * (step + 1) / warmup
        span = max(1, total - 1 - warmup)
        progress = min(1.0, (step - warmup) / span)
        end = base * end_ratio
        return end + (base - end) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr_at


def autocast(enabled):
    """PyTorch's CPU mixed precision as its users turn it on: linear layers
    and matmuls in bfloat16 through oneDNN, the rest as autocast decides."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


def val_loss(model, val, context, batch=256, bf16=False, vocab=256):
    n = (len(val) - 1 - context) // context + 1
    total = 0.0
    with torch.no_grad():
        for b in range(0, n, batch):
            starts = torch.arange(b, min(n, b + batch)) * context
            idx = starts[:, None] + torch.arange(context + 1)[None, :]
            w = val[idx].long()
            with autocast(bf16):
                logits = model(w[:, :-1]).float()
            total += F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1), reduction="sum").item()
    return total / (n * context)


def train(a):
    torch.set_num_threads(1)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(a.seed)
    vocab, bytes_per_token = 256, 1.0
    if a.tokens:  # shardline's token shards (`shardline data tokenize`), as nanoGPT's train.bin
        manifest = json.load(open(f"{a.tokens}/manifest.json"))
        dtype = np.uint16 if manifest["token_bytes"] == 2 else np.uint32

        def split(name):
            parts = [np.fromfile(f"{a.tokens}/{s['file']}", dtype=dtype) for s in manifest[name]]
            return torch.from_numpy(np.concatenate(parts).astype(np.int32))
        text, val = split("train"), split("val")
        vocab = manifest["tokenizer"]["vocab_size"]
        bytes_per_token = sum(s["text_bytes"] for s in manifest["val"]) / len(val)
    else:
        text = torch.from_numpy(np.fromfile(a.train, dtype=np.uint8))
        val = torch.from_numpy(np.fromfile(a.val, dtype=np.uint8))
    batches = None
    if a.ref:
        meta = json.load(open(f"{a.ref}/meta.json"))
        if (meta["steps"], meta["batch"], meta["context"]) != (a.steps, a.batch, a.context):
            sys.exit(f"{a.ref}: written for {meta['steps']} steps of {meta['batch']} x {meta['context']}")
        net = load_gpt(meta, f"{a.ref}/init.safetensors")
        batches = np.memmap(f"{a.ref}/batches.bin", dtype=np.int32, mode="r").reshape(a.steps, 2, a.batch, a.context)
    else:
        net = GPT(a.context, a.layers, a.d_model, a.heads, a.mlp_ratio, vocab=vocab)
        gpt2_init(net, a.layers)
    model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in net.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(a.b1, a.b2), eps=a.eps)
    lr_at = cosine(a.lr, a.warmup, a.steps)
    gen = torch.Generator().manual_seed(a.seed)
    lo, hi = rank * a.batch // world, (rank + 1) * a.batch // world
    offsets = torch.arange(a.context + 1)[None, :]
    train_seconds, step_times = 0.0, []
    for s in range(a.steps):
        if batches is None:
            starts = torch.randint(0, len(text) - a.context, (a.batch,), generator=gen)[lo:hi]
        else:
            step_batch = torch.from_numpy(np.array(batches[s, :, lo:hi]))
        t0 = time.perf_counter()
        if batches is None:
            w = text[starts[:, None] + offsets].long()
        else:  # tokens then targets: the window is the tokens plus the last target
            w = torch.cat([step_batch[0], step_batch[1][:, -1:]], dim=1).long()
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=True)
        # The global mean per token: DDP averages the ranks' gradients.
        with autocast(a.autocast):
            loss = F.cross_entropy(model(w[:, :-1]).reshape(-1, vocab), w[:, 1:].reshape(-1), reduction="sum")
        (loss * (world / (a.batch * a.context))).backward()
        if a.grad_clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), a.grad_clip_norm)
        opt.step()
        dt = time.perf_counter() - t0
        train_seconds += dt
        step_times.append(dt)
        if rank == 0 and a.eval_every > 0 and ((s + 1) % a.eval_every == 0 or s + 1 == a.steps):
            v = val_loss(net, val, a.context, bf16=a.autocast, vocab=vocab)
            print(json.dumps({"step": s + 1, "split": "eval", "loss": v,
                              "bits_per_byte": v / math.log(2) / bytes_per_token,
                              "train_seconds": train_seconds}), flush=True)
    if rank == 0:
        steady = sorted(step_times[len(step_times) // 10:])
        tokens = a.batch * a.context
        print(json.dumps({"summary": True, "world": world, "steps": a.steps, "train_seconds": train_seconds,
                          "tokens_per_second": a.steps * tokens / train_seconds,
                          "steady_tokens_per_second": tokens / steady[len(steady) // 2],
                          "torch": torch.__version__}), flush=True)
    if distributed:
        dist.destroy_process_group()
    return 0


# The fixture's model: small enough to commit (a few tens of KB), with every
# piece whose semantics finite differences cannot pin: the tanh GELU,
# LayerNorm's eps, the tied head, the causal mask, the position embedding.
FIXTURE = dict(context=8, layers=2, d_model=8, heads=2, mlp_ratio=4, batch=2, seed=46)


def save_safetensors(path, tensors):
    """{name: tensor} as a safetensors file (F32 / I32), names sorted."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        dtype = {torch.float32: "F32", torch.int32: "I32"}[t.dtype]
        raw = t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def fixture(args):
    """What tests/worker/model/gpt_torch_fixture_test.cc checks shardline's GPT
    against: parameters (GPT-2's initialisation, seeded), one batch, and
    PyTorch's logits, mean loss and gradients of that loss."""
    torch.manual_seed(FIXTURE["seed"])
    torch.set_num_threads(1)
    c = FIXTURE
    model = GPT(c["context"], c["layers"], c["d_model"], c["heads"], c["mlp_ratio"])
    with torch.no_grad():
        # Weights large enough that GELU's inputs are of order 1 (where its
        # tanh and erf forms differ by 1e-3; at GPT-2's 0.02 they agree to
        # 1e-7), LayerNorm gains and biases away from 1 and 0.
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.3)
            else:
                nn.init.normal_(p, 1.0 if "ln" in name and name.endswith("weight") else 0.0, 0.1)
    tokens = torch.randint(0, 256, (c["batch"], c["context"]), dtype=torch.int32)
    targets = torch.randint(0, 256, (c["batch"], c["context"]), dtype=torch.int32)
    logits = model(tokens.long())
    loss = F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1).long())
    loss.backward()
    params = {n: p for n, p in model.state_dict().items() if n != "lm_head.weight"}
    grads = {n: p.grad for n, p in model.named_parameters()}
    os.makedirs(args.out, exist_ok=True)
    save_safetensors(f"{args.out}/params.safetensors", params)
    save_safetensors(f"{args.out}/grads.safetensors", grads)
    save_safetensors(f"{args.out}/batch.safetensors",
                     {"tokens": tokens, "targets": targets, "logits": logits.reshape(-1, 256),
                      "loss": loss.reshape(1)})
    with open(f"{args.out}/meta.json", "w") as f:
        json.dump({**c, "torch": torch.__version__, "loss": loss.item()}, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {sum(p.numel() for p in params.values())} parameters, loss {loss.item():.6f}")
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--ref", required=True)
    c.add_argument("--metrics", required=True)
    c.add_argument("--autocast", action="store_true", help="bfloat16 autocast (against train.precision BF16)")
    fx = sub.add_parser("fixture")
    fx.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--train", default="")
    t.add_argument("--val", default="")
    t.add_argument("--tokens", default="", help="a directory of shardline token shards, in place of --train/--val")
    t.add_argument("--ref", default="", help="shardline-gpt-reference's DIR: its init and batches")
    t.add_argument("--autocast", action="store_true", help="bfloat16 autocast (against train.precision BF16)")
    for name, default in [("steps", 3000), ("batch", 32), ("context", 128), ("layers", 4), ("d_model", 128),
                          ("heads", 4), ("mlp_ratio", 4), ("warmup", 100), ("eval_every", 500), ("seed", 0)]:
        t.add_argument(f"--{name}", type=int, default=default)
    for name, default in [("lr", 3e-3), ("weight_decay", 0.1), ("b1", 0.9), ("b2", 0.99), ("eps", 1e-8),
                          ("grad_clip_norm", 1.0)]:
        t.add_argument(f"--{name}", type=float, default=default)
    args = p.parse_args()
    return {"check": check, "fixture": fixture, "train": train}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
