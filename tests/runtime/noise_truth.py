"""The gradient noise scale's estimator against a closed-form truth (docs/batch-size.md).

Least squares y = x.w* + e, x ~ N(0, I_d), e ~ N(0, s^2), at parameters w = w* + D:
a clip's gradient is g = x (x.D - e), so (Gaussian fourth moments)
    G = E g = D,   tr(Sigma) = E|g|^2 - |G|^2 = (d + 1)|D|^2 + d s^2,
    B_noise = tr(Sigma) / |G|^2.
Each step draws `gpus` GPUs of `per_gpu` clips: the squared norm of each GPU's mean
gradient (averaged over the GPUs) and of the global mean are what `vexp run` measures;
vexp's estimator (the C++ NoiseScale, through vexp_noise_estimator) turns them into
the per-step estimates of |G|^2 and tr(Sigma), whose means must be the truth (within
4 standard errors and 10 %), at a small batch (2 clips per GPU, 8 in all: far below
B_noise) and a large one (64 per GPU, 512 in all: far above), and the smoothed B_noise
(ratio of moving averages) within 15 % of the truth.
Usage: noise_truth.py VEXP_NOISE_ESTIMATOR
"""
import subprocess
import sys

import torch

tool = sys.argv[1]
torch.manual_seed(0)
d, s = 32, 0.5
D = torch.randn(d, dtype=torch.float64)
D = D / D.norm()  # |G|^2 = 1
g2_true = 1.0
tr_true = (d + 1) * g2_true + d * s * s  # 41
b_true = tr_true / g2_true
steps = 3000
failed = False
for per_gpu, gpus in ((2, 4), (64, 8)):
    lines = []
    for _ in range(steps):
        x = torch.randn(gpus, per_gpu, d, dtype=torch.float64)
        e = s * torch.randn(gpus, per_gpu, dtype=torch.float64)
        g = x * ((x @ D) - e).unsqueeze(-1)  # per-clip gradients [gpus, per_gpu, d]
        gpu = g.mean(1)
        small = (gpu * gpu).sum(1).mean().item()
        glob = gpu.mean(0)
        big = (glob * glob).sum().item()
        lines.append(f"{small!r} {big!r} {per_gpu} {per_gpu * gpus}")
    out = subprocess.run([tool, "0.999"], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rows = torch.tensor([[float(v) for v in l.split()] for l in out.stdout.splitlines()], dtype=torch.float64)
    assert rows.shape[0] == steps, rows.shape
    est_g2, est_tr = rows[:, 0], rows[:, 1]
    m_g2, m_tr = est_g2.mean().item(), est_tr.mean().item()
    se_g2 = est_g2.std().item() / steps ** 0.5
    se_tr = est_tr.std().item() / steps ** 0.5
    smoothed = rows[-1, 4].item()
    ratio_of_means = m_tr / m_g2
    print(f"B_small {per_gpu:3d} B_big {per_gpu * gpus:4d}: mean |G|^2 {m_g2:.4f} (truth {g2_true:.4f}, "
          f"se {se_g2:.4f}), mean tr(Sigma) {m_tr:.3f} (truth {tr_true:.3f}, se {se_tr:.3f}), "
          f"B_noise: ratio of means {ratio_of_means:.2f}, smoothed (ema 0.999) at the end {smoothed:.2f} "
          f"(truth {b_true:.2f})")
    for name, m, se, t in (("|G|^2", m_g2, se_g2, g2_true), ("tr(Sigma)", m_tr, se_tr, tr_true)):
        if abs(m - t) > 4 * se or abs(m - t) > 0.10 * t:
            print(f"FAIL: the mean {name} estimate {m:.4f} is not the truth {t:.4f} (se {se:.4f})")
            failed = True
    if abs(ratio_of_means - b_true) > 0.10 * b_true:
        print(f"FAIL: the ratio of the means {ratio_of_means:.2f} is not B_noise {b_true:.2f}")
        failed = True
    if abs(smoothed - b_true) > 0.15 * b_true:
        print(f"FAIL: the smoothed B_noise {smoothed:.2f} is not {b_true:.2f}")
        failed = True
sys.exit(1 if failed else 0)
