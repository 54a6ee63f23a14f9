#!/usr/bin/python3
"""torch_stream.py — the engine's streaming algorithm written in PyTorch, for the benchmark.

Same algorithm as lib/cc_engine.c (spec "Incremental inference"), batched over all channels
of all cells (channel c = cell * F + f, all cells stepping together):
  - per channel a ring of the last R = max(N*P + P, M) raw values;
  - when step t completes a patch (t = e) the normalisation is re-estimated (float64) and the
    n <= N cached tokens of every channel are recomputed as one batch through all L layers
    (causal mask among cached tokens), keeping per layer K and V as (C, H, n, dk);
  - every step only the current token of every channel runs through the layers: one
    F.linear (sgemm) per dense part over all C channels, attention against the cached K/V
    plus its own key, then the head.
Time features and PE are computed in double precision (reference.py's functions) and cast.

It loads the same safetensors file as the C engine (--model), so both can be timed on one
model in one benchmark run. One thread by default (torch.set_num_threads(1)).

  # timing (prints one JSON line with channel_steps_per_s)
  /usr/bin/python3 tests/bench/torch_stream.py --model M.safetensors --cells 1024 --steps 64
  # a random model of the default shape (F=8 P=16 N=21 M=336 d=64 H=4 L=2 dff=128 Hz=24)
  /usr/bin/python3 tests/bench/torch_stream.py --write-random-model /tmp/default.safetensors
  # correctness: stream the golden series (and scaled copies as extra cells) and compare
  # every step with reference.py (exit 1 if max abs error on y > 1e-4); with --model also
  # streams synthetic series (0.1 .. 1e8) through that model and compares with reference.py
  /usr/bin/python3 tests/bench/torch_stream.py --check tests/data/golden [--model M]

OpenBLAS kernels: torch uses Debian's OpenBLAS (libblas.so.3), which on this CPU picks
its Haswell kernels. --openblas-coretype (default: SKYLAKEX when /proc/cpuinfo has
avx512f and OPENBLAS_CORETYPE is unset; 'none' leaves it alone) sets OPENBLAS_CORETYPE
before torch is imported; the value used is printed in the JSON.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))


def pick_coretype(arg):
    if arg == "none":
        return os.environ.get("OPENBLAS_CORETYPE", "")
    if arg != "auto":
        os.environ["OPENBLAS_CORETYPE"] = arg
        return arg
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        with open("/proc/cpuinfo") as fh:
            avx512 = "avx512f" in fh.read()
    except OSError:
        avx512 = False
    if avx512:
        os.environ["OPENBLAS_CORETYPE"] = "SKYLAKEX"
        return "SKYLAKEX"
    return ""


class TorchStream:
    """Streaming state and step for C channels sharing one model and one step clock."""

    def __init__(self, torch, model, n_cells, dtype=None):
        self.t_ = torch
        self.F_ = torch.nn.functional
        m = self.m = model
        self.dtype = dtype or torch.float32
        self.C = n_cells * m.F
        self.R = max(m.N * m.P + m.P, m.M)
        self.dk = m.d // m.H
        T = lambda a: torch.tensor(a, dtype=self.dtype)  # noqa: E731
        w = m.w
        self.emb_w, self.emb_b = T(w["embed.weight"]), T(w["embed.bias"])
        chan = T(w["channel_embed.weight"])
        self.chan_bias = (chan + self.emb_b).repeat(n_cells, 1)  # (C, d), c = cell*F + f
        self.layers = []
        for l in range(m.L):
            g = lambda n: T(w["layers.%d.%s" % (l, n)])  # noqa: E731
            qkv_w = torch.cat([g("attn.q_proj.weight"), g("attn.k_proj.weight"),
                               g("attn.v_proj.weight")])
            qkv_b = torch.cat([g("attn.q_proj.bias"), g("attn.k_proj.bias"),
                               g("attn.v_proj.bias")])
            self.layers.append(dict(
                qkv_w=qkv_w.contiguous(), qkv_b=qkv_b, o_w=g("attn.o_proj.weight"),
                o_b=g("attn.o_proj.bias"), g1=g("norm1.weight"), b1=g("norm1.bias"),
                up_w=g("ffn.up.weight"), up_b=g("ffn.up.bias"), dn_w=g("ffn.down.weight"),
                dn_b=g("ffn.down.bias"), g2=g("norm2.weight"), b2=g("norm2.bias")))
        self.head_w, self.head_b = T(w["head.weight"]), T(w["head.bias"])
        self.ring = torch.zeros(self.C, self.R, dtype=self.dtype)
        self.p0 = None
        self.t = None
        self.e_built = None
        self.kv = None        # per layer (K, V), each (C, H, n, dk)
        self.mu = self.sigma = None
        self.y = None         # (C, Hz, 2)

    # -- helpers ---------------------------------------------------------------------
    def _pe_tau(self, ends):
        import numpy as np
        import reference as ref
        m = self.m
        pe = [ref.pos_encoding(q / m.P, m.d) for q in ends]
        tau = [ref.time_features(q, m.S, m.tz) for q in ends]
        return (self.t_.tensor(np.array(pe), dtype=self.dtype),
                self.t_.tensor(np.array(tau), dtype=self.dtype))

    def _values(self, ends):
        """(C, len(ends), P) raw values of the P steps ending at each q."""
        P = self.m.P
        idx = [[(q - P + 1 + i) % self.R for i in range(P)] for q in ends]
        return self.ring[:, self.t_.tensor(idx).reshape(-1)].reshape(self.C, len(ends), P)

    def _embed(self, xn, ends):
        """xn (C, k, P) normalised values → z (C, k, d)."""
        pe, tau = self._pe_tau(ends)
        C, k, P = xn.shape
        inp = self.t_.cat([xn, tau.expand(C, k, 4)], dim=2).reshape(C * k, P + 4)
        z = self.F_.linear(inp, self.emb_w).reshape(C, k, -1)
        return z + self.chan_bias[:, None, :] + pe[None]

    def _ffn_ln(self, z, a, ly):
        F_ = self.F_
        d = self.m.d
        z1 = F_.layer_norm(z + a, (d,), ly["g1"], ly["b1"], 1e-5)
        h = F_.relu(F_.linear(z1, ly["up_w"], ly["up_b"]))
        return F_.layer_norm(z1 + F_.linear(h, ly["dn_w"], ly["dn_b"]), (d,), ly["g2"],
                             ly["b2"], 1e-5)

    # -- the rebuild -------------------------------------------------------------------
    def _rebuild(self, e):
        torch, m = self.t_, self.m
        lo = max(self.p0, e - m.M + 1)
        win = self.ring[:, torch.tensor([p % self.R for p in range(lo, e + 1)])]
        w64 = win.double()
        mu = w64.mean(dim=1)
        sd = ((w64 - mu[:, None]) ** 2).mean(dim=1).sqrt()
        sigma = sd + 1e-5 * (1.0 + mu.abs())
        self.mu, self.sigma = mu.to(self.dtype), sigma.to(self.dtype)
        ends = [e - j * m.P for j in range(m.N - 1, -1, -1) if e - j * m.P - m.P + 1 >= self.p0]
        n = len(ends)
        xn = (self._values(ends) - self.mu[:, None, None]) / self.sigma[:, None, None]
        z = self._embed(xn, ends).reshape(self.C * n, m.d)
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        self.kv = []
        C, H, dk = self.C, m.H, self.dk
        for ly in self.layers:
            qkv = self.F_.linear(z, ly["qkv_w"], ly["qkv_b"]).reshape(C, n, 3, H, dk)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # (C, H, n, dk)
            k, v = k.contiguous(), v.contiguous()
            s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dk)
            s = s.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            a = torch.matmul(s, v).transpose(1, 2).reshape(C * n, m.d)
            a = self.F_.linear(a, ly["o_w"], ly["o_b"])
            z = self._ffn_ln(z, a, ly)
            self.kv.append((k, v))
        self.e_built = e

    # -- one step of every channel -------------------------------------------------------
    def step(self, t, values):
        """values: (C,) raw values of step t (all channels). Returns False on cold start."""
        torch, m = self.t_, self.m
        if self.p0 is None:
            self.p0 = t
        elif t != self.t + 1:
            raise ValueError("steps must be consecutive")
        self.t = t
        self.ring[:, t % self.R] = values
        e = ((t + 1) // m.P) * m.P - 1
        if e - m.P + 1 < self.p0:
            self.y = None
            return False
        if e != self.e_built:
            self._rebuild(e)
        C, H, dk, d = self.C, m.H, self.dk, m.d
        xn = (self._values([t]) - self.mu[:, None, None]) / self.sigma[:, None, None]
        z = self._embed(xn, [t]).reshape(C, d)
        scale = 1.0 / math.sqrt(dk)
        for ly, (K, V) in zip(self.layers, self.kv):
            qkv = self.F_.linear(z, ly["qkv_w"], ly["qkv_b"]).reshape(C, 3, H, 1, dk)
            q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]                      # (C, H, 1, dk)
            s_c = torch.matmul(q, K.transpose(2, 3))                       # (C, H, 1, n)
            s_s = (q * k).sum(dim=-1, keepdim=True)                        # (C, H, 1, 1)
            p = (torch.cat([s_c, s_s], dim=-1) * scale).softmax(dim=-1)
            a = torch.matmul(p[..., :-1], V) + p[..., -1:] * v             # (C, H, 1, dk)
            a = self.F_.linear(a.reshape(C, d), ly["o_w"], ly["o_b"])
            z = self._ffn_ln(z, a, ly)
        self.y = self.F_.linear(z, self.head_w, self.head_b).reshape(C, m.Hz, 2)
        return True


# ---------------------------------------------------------------------------------------


def write_random_model(path, seed=1, **shape):
    import numpy as np
    import reference as ref
    hp = dict(F=8, P=16, N=21, M=336, d=64, H=4, L=2, dff=128, Hz=24, S=3600, tz=0)
    hp.update(shape)
    rng = np.random.default_rng(seed)
    tmp = ref.Model.__new__(ref.Model)
    tmp.d, tmp.dff, tmp.P, tmp.F, tmp.Hz, tmp.L = (hp["d"], hp["dff"], hp["P"], hp["F"],
                                                   hp["Hz"], hp["L"])
    w = {}
    for name, shp in tmp.expected_shapes().items():
        fan_in = shp[-1] if len(shp) == 2 else 1
        if ".norm" in name and name.endswith(".weight"):
            w[name] = 1 + 0.1 * rng.standard_normal(shp)
        elif len(shp) == 2:
            w[name] = rng.uniform(-1, 1, shp) * math.sqrt(3.0 / fan_in)
        else:
            w[name] = 0.02 * rng.standard_normal(shp)
    meta = {"format": ref.FORMAT, "d_model": hp["d"], "n_heads": hp["H"],
            "n_layers": hp["L"], "d_ff": hp["dff"], "patch_len": hp["P"],
            "n_patches": hp["N"], "norm_window": hp["M"], "horizon": hp["Hz"],
            "step_seconds": hp["S"], "tz_offset_s": hp["tz"],
            "features": ",".join("kpi%d" % i for i in range(hp["F"])),
            "name": "random-default-shape"}
    ref.write_safetensors(path, w, meta)


def check(torch, golden_dir):
    """Streams the golden series as cell 0 and scaled/shifted copies as cells 1..2, compares
    every step and channel with reference.forward. Returns the max abs errors."""
    import numpy as np
    import reference as ref
    model = ref.Model.load(os.path.join(golden_dir, "tiny.safetensors"))
    with open(os.path.join(golden_dir, "golden.json")) as fh:
        gold = json.load(fh)
    p0, T = gold["p0"], gold["n_steps"]
    base = np.array(gold["series"], dtype=np.float32)                      # (F, T)
    cells = [base, (base * 3.0 + 1.0).astype(np.float32), base[:, ::-1].copy()]
    X = np.concatenate(cells, axis=0)                                      # (C, T)
    st = TorchStream(torch, model, len(cells))
    err = {"y": 0.0, "mu_rel": 0.0, "sigma_rel": 0.0}
    n_cmp = 0
    for i in range(T):
        t = p0 + i
        ok = st.step(t, torch.tensor(X[:, i]))
        for c in range(X.shape[0]):
            r = ref.forward(model, c % model.F, X[c].astype(np.float64), p0, t,
                            want_trace=False)
            if (r is None) != (not ok):
                raise AssertionError("cold-start mismatch at t=%d c=%d" % (t, c))
            if r is None:
                continue
            n_cmp += 1
            err["y"] = max(err["y"], float(np.abs(st.y[c].double().numpy() - r["y"]).max()))
            err["mu_rel"] = max(err["mu_rel"], abs(float(st.mu[c]) - r["mu"]) /
                                max(abs(r["mu"]), r["sigma"]))
            err["sigma_rel"] = max(err["sigma_rel"],
                                   abs(float(st.sigma[c]) - r["sigma"]) / r["sigma"])
    err["compared_channel_steps"] = n_cmp
    return err


def check_model(torch, model_path, cells=2, T=None, seed=3):
    """Streams synthetic series (magnitudes 0.1 .. 1e8) through any model file and compares
    with reference.forward on a subset of steps (every 7th and the last 20). Max abs err."""
    import numpy as np
    import reference as ref
    m = ref.Model.load(model_path)
    st = TorchStream(torch, m, cells)
    T = T or max(m.N * m.P + m.P, m.M) + 3 * m.P
    rng = np.random.default_rng(seed)
    X = (np.logspace(-1, 8, st.C)[:, None] *
         (1 + 0.3 * np.sin(np.arange(T) * 0.26)[None, :] +
          0.05 * rng.standard_normal((st.C, T)))).astype(np.float32)
    p0 = 118000 * m.P + 5
    err, n = 0.0, 0
    for i in range(T):
        t = p0 + i
        ok = st.step(t, torch.tensor(X[:, i]))
        if ok and (i % 7 == 0 or i >= T - 20):
            for c in range(st.C):
                r = ref.forward(m, c % m.F, X[c].astype(np.float64), p0, t, want_trace=False)
                err = max(err, float(np.abs(st.y[c].double().numpy() - r["y"]).max()))
                n += 1
    return {"model": model_path, "y": err, "compared_channel_steps": n}


def bench(torch, model_path, n_cells, K, warm, seed):
    import reference as ref
    model = ref.Model.load(model_path)
    st = TorchStream(torch, model, n_cells)
    P = model.P
    p0 = 1_000_000 * P + 3                    # an absolute start mid-patch
    total = warm + K
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-1, 8, st.C) if st.C > 1 else torch.ones(1)  # bytes to fractions
    ph = torch.rand(st.C, generator=g) * 6.283
    steps = torch.arange(total, dtype=torch.float32)
    X = scale[None, :] * (1.0 + 0.3 * torch.sin(steps[:, None] * 0.26 + ph[None, :])
                          + 0.05 * torch.randn(total, st.C, generator=g))
    with torch.inference_mode():
        for i in range(warm):
            st.step(p0 + i, X[i])
        t0 = time.perf_counter()
        for i in range(warm, total):
            st.step(p0 + i, X[i])
        dt = time.perf_counter() - t0
    return model, st, dt


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="safetensors weight file (cellcast-tx/2)")
    ap.add_argument("--cells", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=64, help="timed steps K (>= 2P recommended)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed steps first (default: ring size R + P, a full window)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--openblas-coretype", default="auto",
                    help="auto (SKYLAKEX if avx512f), none, or an OpenBLAS core name")
    ap.add_argument("--write-random-model", metavar="PATH",
                    help="write a random default-shape model to PATH and exit")
    ap.add_argument("--check", metavar="GOLDEN_DIR",
                    help="compare streaming with reference.py on the golden series and exit")
    args = ap.parse_args()

    coretype = pick_coretype(args.openblas_coretype)
    # torch.set_num_threads does not reach Debian's pthread OpenBLAS: pin it before import.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)

    if args.write_random_model:
        write_random_model(args.write_random_model)
        print(json.dumps({"wrote": args.write_random_model}))
        return 0
    if args.check:
        with torch.inference_mode():
            err = check(torch, args.check)
            if args.model:
                err["model_check"] = check_model(torch, args.model)
        ok = err["y"] <= 1e-4 and err["mu_rel"] <= 1e-6 and err["sigma_rel"] <= 1e-6
        ok = ok and ("model_check" not in err or err["model_check"]["y"] <= 1e-4)
        err["ok"] = bool(ok)
        print(json.dumps(err))
        return 0 if ok else 1
    if not args.model:
        ap.error("--model is required (or --write-random-model / --check)")
    import reference as ref
    m0 = ref.Model.load(args.model)
    warm = args.warmup or (max(m0.N * m0.P + m0.P, m0.M) + m0.P)
    model, st, dt = bench(torch, args.model, args.cells, args.steps, warm, args.seed)
    cs = st.C * args.steps
    print(json.dumps({
        "impl": "torch_stream", "torch": torch.__version__, "threads": args.threads,
        "openblas_coretype": coretype or "default", "cells": args.cells,
        "channels": st.C, "steps": args.steps, "warmup_steps": warm,
        "shape": dict(F=model.F, P=model.P, N=model.N, M=model.M, d=model.d, H=model.H,
                      L=model.L, dff=model.dff, Hz=model.Hz),
        "seconds": dt, "channel_steps_per_s": cs / dt, "ns_per_channel_step": dt * 1e9 / cs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
