#!/usr/bin/env python3
"""The rational erf of the CPU's AVX-512 GELU (runtime/src/cpu/gelu_erf_avx512.cpp):
erf(z) ~ z * P(z^2) / Q(z^2) on [0, 3.9] (GELU's |x| <= 5.5), P of degree 6 and Q of degree 5
in z^2, Q(0) = 1. Fitted by linearized least squares (z P - erf(z) Q, weighted by the last
Q), then Lawson's reweighting towards the minimax error. Prints the coefficients and the
largest error, in double and in f32 Horner with FMA, which the kernel's comment quotes.

usage: /usr/bin/python3 runtime/tools/fit_erf.py   (numpy)
"""
from math import erf

import numpy as np

NP, NQ = 7, 6
z = np.concatenate([np.linspace(0, 3.9, 20001), np.linspace(0, 0.01, 500)])
f = np.array([erf(v) for v in z])
z2 = z * z
w = np.ones_like(z)
q = np.ones_like(z)
for it in range(60):
    A = np.column_stack([z * z2**i for i in range(NP)] + [-f * z2**j for j in range(1, NQ)])
    W = w / q
    c, *_ = np.linalg.lstsq(A * W[:, None], f * W, rcond=None)
    P, Q = c[:NP], np.concatenate([[1.0], c[NP:]])
    q = sum(Q[j] * z2**j for j in range(NQ))
    err = z * sum(P[i] * z2**i for i in range(NP)) / q - f
    if it > 5:
        w = w * (np.abs(err) / np.abs(err).max() + 1e-3) ** 0.5
        w /= w.max()


def horner(coefs, x):
    """In f32 with one rounding per step (an FMA)."""
    r = np.full_like(x, np.float32(coefs[-1]))
    for a in coefs[-2::-1]:
        r = (r.astype(np.float64) * x.astype(np.float64) + np.float64(np.float32(a))).astype(np.float32)
    return r


zf = z.astype(np.float32)
rf = (zf * horner(P, zf * zf)) / horner(Q, zf * zf)
print("P:", ", ".join("%.9e" % v for v in P))
print("Q:", ", ".join("%.9e" % v for v in Q))
print("largest error: %.2e in double, %.2e in f32" % (np.abs(err).max(), np.abs(rf - f).max()))
