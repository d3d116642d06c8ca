#!/usr/bin/python3
"""Parity of vexp against PyTorch (run by ctest with /usr/bin/python3):
parity.py NAME VEXP SOURCE_DIR. Each test writes weights and inputs with
torch.save, runs `vexp predict ... --logits out.json` (or export) and compares."""
import json
import os
import subprocess
import sys
import tempfile

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refmodels as R  # noqa: E402

NAME, VEXP, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))
TMP = tempfile.mkdtemp(prefix="vexp_parity_%s_" % NAME)
K400 = os.path.join(SRC, "recipes", "kinetics400")
torch.set_num_threads(2)


def vexp(*args, expect=0, stdout_only=False):
    p = subprocess.run([VEXP, *args], capture_output=True, text=True)
    out = p.stdout + p.stderr
    if p.returncode != expect:
        sys.exit("FAIL: vexp %s exited %d (expected %d):\n%s" % (" ".join(args), p.returncode, expect, out))
    for bad in ("terminate called", "Aborted", "core dumped", "Segmentation fault"):
        if bad in out:
            sys.exit("FAIL: vexp crashed:\n" + out)
    return p.stdout if stdout_only else out


def path(name):
    return os.path.join(TMP, name)


def predict(recipe, weights, x, *extra):
    xin = path("input.pt")
    torch.save(x, xin)
    out = path("logits.json")
    vexp("predict", recipe, "--weights", weights, "--input", xin, "--logits", out, *extra)
    with open(out) as f:
        return torch.tensor(json.load(f)["logits"], dtype=torch.float64)


def compare(what, got, ref, tol=1e-4):
    ref = ref.double()
    scale = max(ref.abs().max().item(), 1e-12)
    err = (got - ref).abs().max().item()
    print("%s: max |diff| = %.3e, logit scale %.3e, relative %.3e (tolerance %.0e)" % (what, err, scale, err / scale, tol))
    if got.shape != ref.shape:
        sys.exit("FAIL: %s: shape %s vs %s" % (what, tuple(got.shape), tuple(ref.shape)))
    if not err / scale <= tol:
        sys.exit("FAIL: %s differs from PyTorch" % what)


def mmaction_names(sd):
    """torchvision ResNet names -> mmaction2's ConvModule names (for TSN/TSM 2D backbones)."""
    import re
    out = {}
    for k, v in sd.items():
        k2 = re.sub(r"(^|\.)conv(\d)\.(weight|bias)$", r"\1conv\2.conv.\3", k)
        k2 = re.sub(r"(^|\.)bn(\d)\.", r"\1conv\2.bn.", k2)
        k2 = k2.replace("downsample.0.", "downsample.conv.").replace("downsample.1.", "downsample.bn.")
        out[k2] = v
    return out


def test_resnet50():
    m = R.randomise(torchvision.models.resnet50(), 1).eval()
    w = path("resnet50.pth")
    torch.save(m.state_dict(), w)  # zip format, torchvision names (fc: 1000 classes)
    x = torch.randn(2, 1, 3, 96, 96)
    with torch.no_grad():
        ref = m(x[:, 0])
    compare("torchvision ResNet-50", predict(os.path.join(HERE, "resnet50.toml"), w, x, "--classes", "1000"), ref)


def tsn_reference(shift, seed):
    m = R.TSN(torchvision.models.resnet50(), 400, 8, shift=shift)
    return R.randomise(m, seed).eval()


def test_tsm_official():
    m = tsn_reference(True, 2)
    sd = {"module." + k: v for k, v in m.state_dict().items()}
    assert any(".conv1.net.weight" in k for k in sd)
    ckpt = {"epoch": 50, "arch": "resnet50", "state_dict": sd, "best_prec1": 71.2}
    x = torch.randn(2, 8, 3, 64, 64)
    with torch.no_grad():
        ref = m(x)
    for legacy in (True, False):
        w = path("tsm_official_%s.pth" % ("legacy" if legacy else "zip"))
        torch.save(ckpt, w, _use_new_zipfile_serialization=not legacy)
        got = predict(os.path.join(K400, "tsm_r50_8f.toml"), w, x, "--classes", "400")
        compare("TSM-R50 8f, official checkpoint (%s format)" % ("legacy" if legacy else "zip"), got, ref)
    # The shift matters: the same weights through TSN (no shift) are far from TSM's logits.
    tsn = predict(os.path.join(K400, "tsn_r50_8f.toml"), w, x, "--classes", "400")
    if (tsn - ref.double()).abs().max().item() < 1e-2 * ref.abs().max().item():
        sys.exit("FAIL: TSN and TSM agree on the same weights: the shift had no effect")


def test_tsn_mmaction():
    m = tsn_reference(False, 3)
    sd = {}
    for k, v in mmaction_names({k[len("base_model."):]: v for k, v in m.state_dict().items()
                                if k.startswith("base_model.")}).items():
        sd["backbone." + k] = v
    sd["cls_head.fc_cls.weight"] = m.new_fc.weight.detach()
    sd["cls_head.fc_cls.bias"] = m.new_fc.bias.detach()
    w = path("tsn_mmaction.pth")
    torch.save({"meta": {"epoch": 100, "config": "tsn"}, "state_dict": sd}, w)
    x = torch.randn(1, 8, 3, 64, 64)
    with torch.no_grad():
        ref = m(x)
    compare("TSN-R50 8f, mmaction2 checkpoint", predict(os.path.join(K400, "tsn_r50_8f.toml"), w, x, "--classes", "400"),
            ref)


def test_i3d():
    for style, recipe in ((False, "i3d_r50_311_32f.toml"), (True, "i3d_r50_333_32f.toml")):
        m = R.randomise(R.I3D(400, style333=style), 4).eval()
        w = path("i3d.pth")
        torch.save({"meta": {}, "state_dict": m.state_dict()}, w)  # mmaction2 names
        x = torch.randn(1, 8, 3, 64, 64)
        with torch.no_grad():
            ref = m(x)
        compare("I3D-R50 %s (mmaction2 names)" % ("3x3x3" if style else "3x1x1"),
                predict(os.path.join(K400, recipe), w, x, "--classes", "400"), ref)


def test_inflation():
    r2d = R.randomise(torchvision.models.resnet50(num_classes=400), 5).eval()
    w = path("resnet50_2d.pth")
    torch.save(r2d.state_dict(), w)
    i3d = R.I3D(400).eval()
    sd2 = r2d.state_dict()
    with torch.no_grad():
        for k, v in i3d.state_dict().items():
            k2 = k.replace("backbone.", "").replace("cls_head.fc_cls.", "fc.")
            k2 = k2.replace("downsample.conv.", "downsample.0.").replace("downsample.bn.", "downsample.1.")
            import re
            k2 = re.sub(r"(^|\.)conv(\d)\.conv\.", r"\1conv\2.", k2)
            k2 = re.sub(r"(^|\.)conv(\d)\.bn\.", r"\1bn\2.", k2)
            src = sd2[k2]
            if v.dim() == 5:
                t = v.shape[2]
                src = src.unsqueeze(2).repeat(1, 1, t, 1, 1) / t
            v.copy_(src)
    x = torch.randn(1, 8, 3, 64, 64)
    with torch.no_grad():
        ref = i3d(x)
    compare("I3D-R50 from inflated 2D ResNet-50 weights",
            predict(os.path.join(K400, "i3d_r50_311_32f.toml"), w, x, "--classes", "400"), ref)


def test_conv3d():
    recipe = os.path.join(HERE, "conv3d.toml")
    conv = torch.nn.Conv3d(3, 12, (3, 3, 3), stride=(1, 2, 2), padding=(1, 0, 2), dilation=(2, 1, 1), groups=3)
    fc = torch.nn.Linear(12, 7)
    sd = {"conv.weight": conv.weight, "conv.bias": conv.bias, "head.fc.weight": fc.weight, "head.fc.bias": fc.bias}
    w = path("conv3d.pth")
    torch.save({k: v.detach() for k, v in sd.items()}, w)
    x = torch.randn(2, 6, 3, 20, 18)
    with torch.no_grad():
        y = torch.nn.functional.conv3d(x.transpose(1, 2), conv.weight, conv.bias, (1, 2, 2), (1, 0, 2), (2, 1, 1), 3)
        ref = fc(y.mean((2, 3, 4)))
    compare("conv3d + classifier3d vs torch.nn.functional.conv3d", predict(recipe, w, x, "--classes", "7"), ref)


def test_export_roundtrip():
    run = path("run")
    vexp("run", os.path.join(HERE, "tsm_r18_tiny.toml"), "--out", run)
    ckpt = os.path.join(run, "checkpoints")
    ckpt = os.path.join(ckpt, sorted(os.listdir(ckpt))[-1])
    x = torch.randn(2, 4, 1, 32, 32)
    got = predict(os.path.join(HERE, "tsm_r18_tiny.toml"), ckpt, x)
    for naming in ("tsm", "torchvision", "mmaction"):
        out = path("export_%s.pth" % naming)
        vexp("export", run, "--to", out, "--naming", naming)
        sd = torch.load(out, weights_only=True)
        if naming == "tsm":
            base = torchvision.models.resnet18(num_classes=4)
            base.conv1 = torch.nn.Conv2d(1, 64, 3, 1, 1, bias=False)
            base.maxpool = torch.nn.Identity()
            m = R.TSN(base, 4, 4, shift=True, dropout=0.2).eval()
            # The official code's checkpoint['state_dict'], saved from DataParallel.
            m.load_state_dict({k[len("module."):]: v for k, v in sd["state_dict"].items()}, strict=True)
        elif naming == "torchvision":
            base = torchvision.models.resnet18(num_classes=4)
            base.conv1 = torch.nn.Conv2d(1, 64, 3, 1, 1, bias=False)
            base.maxpool = torch.nn.Identity()
            m = R.TSN(base, 4, 4, shift=True, dropout=0.2).eval()
            fc = {k: v for k, v in sd.items() if k.startswith("fc.")}
            body = {k: v for k, v in sd.items() if not k.startswith("fc.")}
            shifted = {}
            for k, v in body.items():
                parts = k.split(".")
                if parts[0].startswith("layer") and parts[2] == "conv1":
                    k = ".".join(parts[:3] + ["net"] + parts[3:])
                shifted["base_model." + k] = v
            shifted["new_fc.weight"], shifted["new_fc.bias"] = fc["fc.weight"], fc["fc.bias"]
            m.load_state_dict(shifted, strict=True)
        else:
            # mmaction2's ResNetTSM with its ConvModule names, loaded strictly.
            m = R.MMRecognizer2D(4, 4, depth=18, shift=True, in_channels=1, cifar_stem=True).eval()
            m.load_state_dict(sd["state_dict"], strict=True)
        with torch.no_grad():
            ref = m(x)
        compare("export (%s names) -> torch.load -> PyTorch TSM" % naming, got, ref)


def keys_of(sd):
    return {k: "x".join(str(s) for s in v.shape) if v.dim() else "scalar" for k, v in sd.items()}


def same_keys(what, got, want):
    if got == want:
        print("%s: the %d keys and shapes match" % (what, len(want)))
        return
    extra = sorted(set(got) - set(want))[:8]
    missing = sorted(set(want) - set(got))[:8]
    shapes = sorted(k for k in set(got) & set(want) if got[k] != want[k])[:8]
    sys.exit("FAIL: %s: keys differ from the reference\n  not in the reference: %s\n  missing: %s\n"
             "  other shapes: %s" % (what, extra, missing, [(k, got[k], want[k]) for k in shapes]))


def test_export_names():
    """`vexp export` of TSM-R50 / TSN-R50 (the Kinetics recipes) has exactly the keys and shapes of mmaction2's and
    the official TSM code's checkpoints (tests/parity/keys, from their module structure); the files load strictly
    into those structures with the same logits, and load back into vexp (new and old mmaction names alike)."""
    import state_dict_keys as K
    p = subprocess.run([sys.executable, os.path.join(HERE, "state_dict_keys.py"), "--check"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit("FAIL: " + p.stdout + p.stderr)
    x = torch.randn(1, 8, 3, 64, 64)
    shape = ["--input", "8x3x64x64", "--classes", "400"]
    for shift, recipe in ((True, "tsm_r50_8f.toml"), (False, "tsn_r50_8f.toml")):
        name = "TSM" if shift else "TSN"
        recipe = os.path.join(K400, recipe)
        official = tsn_reference(shift, 7)
        src = path("official_%s.pth" % name)
        torch.save({"epoch": 50, "state_dict": {"module." + k: v for k, v in official.state_dict().items()}}, src)
        with torch.no_grad():
            ref = official(x)
        # mmaction2 names: the fixture, key for key; mmaction2's structure loads it strictly.
        mm = path("mm_%s.pth" % name)
        out = vexp("export", src, "--recipe", recipe, "--naming", "mmaction", "--to", mm, *shape)
        if "under 'state_dict'" not in out:
            sys.exit("FAIL: the export does not say where the tensors are:\n" + out)
        sd = torch.load(mm, weights_only=True)["state_dict"]
        same_keys("%s-R50 export, mmaction names" % name, keys_of(sd),
                  K.read_keys("mmaction2_%s_r50_k400" % ("tsm" if shift else "tsn")))
        m = R.MMRecognizer2D(400, 8, depth=50, shift=shift).eval()
        m.load_state_dict(sd, strict=True)
        with torch.no_grad():
            compare("%s-R50 official -> vexp export (mmaction) -> mmaction2 structure" % name, m(x).double(), ref)
        compare("%s-R50 mmaction export -> vexp predict" % name, predict(recipe, mm, x, "--classes", "400"), ref)
        # The names vexp's mmaction exports used to write still load.
        old = {}
        for k, v in sd.items():
            k = k.replace(".conv1.conv.net.", ".conv1.net.conv.")
            if k.startswith("backbone.layer") and shift:
                k = k.replace(".conv1.bn.", ".conv1.net.bn.")
            old[k] = v
        if shift and not any(".conv1.net.conv.weight" in k for k in old):
            sys.exit("FAIL: the old names were not built")
        oldf = path("mm_old_%s.pth" % name)
        torch.save({"state_dict": old}, oldf)
        compare("%s-R50 old vexp mmaction names -> vexp predict" % name, predict(recipe, oldf, x, "--classes", "400"), ref)
        # torchvision names: torchvision's own ResNet-50 keys.
        tv = path("tv_%s.pth" % name)
        vexp("export", src, "--recipe", recipe, "--naming", "torchvision", "--to", tv, *shape)
        same_keys("%s-R50 export, torchvision names" % name, keys_of(torch.load(tv, weights_only=True)),
                  keys_of(torchvision.models.resnet50(num_classes=400).state_dict()))
    # Official TSM names: the fixture; the official structure loads it strictly.
    tsm = path("tsm_names.pth")
    vexp("export", path("mm_TSM.pth"), "--recipe", os.path.join(K400, "tsm_r50_8f.toml"), "--naming", "tsm", "--to",
         tsm, *shape)
    sd = torch.load(tsm, weights_only=True)["state_dict"]
    same_keys("TSM-R50 export, official TSM names", keys_of(sd), K.read_keys("tsm_official_r50_k400"))
    m = R.TSN(torchvision.models.resnet50(), 400, 8, shift=True).eval()
    m.load_state_dict({k[len("module."):]: v for k, v in sd.items()}, strict=True)
    with torch.no_grad():
        compare("TSM-R50 mmaction -> vexp export (tsm) -> official structure", m(x).double(),
                tsn_reference(True, 7)(x))
    # A state dict without --recipe: what it is and what to give.
    out = vexp("export", src, "--to", path("x.pth"), expect=1)
    if "give the model's --recipe" not in out:
        sys.exit("FAIL: export of a state dict without --recipe does not say to give one:\n" + out)


def test_video():
    import av
    import numpy as np
    mp4 = path("clip.mp4")
    c = av.open(mp4, "w")
    s = c.add_stream("mpeg4", rate=25)
    s.width, s.height, s.pix_fmt = 96, 80, "yuv420p"
    s.options = {"qscale": "1"}
    yy, xx = np.mgrid[0:80, 0:96]
    for t in range(40):
        img = np.stack([(xx * 2 + t * 3) % 256, (yy * 3) % 256, ((xx + yy) + t * 5) % 256], -1).astype(np.uint8)
        for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()
    frames = [f.to_ndarray(format="rgb24") for f in av.open(mp4).decode(video=0)]
    n, T = len(frames), 8
    seg = n / T
    idx = [int(seg / 2 + seg * i) for i in range(T)]
    clip = torch.tensor(np.stack([frames[i] for i in idx])).permute(0, 3, 1, 2).float()  # T,3,80,96
    short = 64 * 256 // 224 + (1 if (64 * 256) % 224 else 0)  # 74, as vexp's default (crop x 256/224, rounded up)
    h, w = clip.shape[2:]
    sc = short / min(h, w)
    clip = torch.nn.functional.interpolate(clip, size=(round(h * sc), round(w * sc)), mode="bilinear",
                                           align_corners=False)
    y0, x0 = (clip.shape[2] - 64) // 2, (clip.shape[3] - 64) // 2
    clip = clip[:, :, y0:y0 + 64, x0:x0 + 64]
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    x = ((clip - mean) / std).unsqueeze(0)
    m = tsn_reference(True, 6)
    sd = {"module." + k: v for k, v in m.state_dict().items()}
    w = path("tsm.pth")
    torch.save({"state_dict": sd}, w)
    with torch.no_grad():
        ref = m(x)
    out = path("video_logits.json")
    vexp("predict", os.path.join(K400, "tsm_r50_8f.toml"), "--weights", w, "--input", mp4, "--clip", "8x3x64x64",
         "--classes", "400", "--logits", out)
    with open(out) as f:
        got = torch.tensor(json.load(f)["logits"], dtype=torch.float64)
    # Different resize implementations (swscale vs torch): a loose bound, and the same top class.
    compare("predict on an mp4 (decode + TSN sampling + resize/crop/normalise)", got, ref, tol=0.1)
    if got.argmax().item() != ref.argmax().item():
        sys.exit("FAIL: top-1 class differs on the video (%d vs %d)" % (got.argmax().item(), ref.argmax().item()))


def test_info():
    expect = {"tsm_r50_8f.toml": (24327632, 32965562368, "8x3x224x224"),
              "tsn_r50_8f.toml": (24327632, 32965562368, "8x3x224x224"),
              "i3d_r50_311_32f.toml": (28043472, 43564040192, "32x3x256x256")}
    for recipe, (params, macs, shape) in expect.items():
        out = vexp("info", os.path.join(K400, recipe), "--input", shape, "--classes", "400", "--json", stdout_only=True)
        j = json.loads(out)
        print(recipe, shape, j["params"], j["flops_per_clip"], j["grad_bytes"])
        if j["params"] != params or j["flops_per_clip"] != macs or j["grad_bytes"] != 4 * params:
            sys.exit("FAIL: info of %s: %s" % (recipe, j))
    # The I3D reference counted in PyTorch (mmcv convention) agrees at 32 x 224^2 too.
    ref = R.count_macs(R.I3D(400), torch.zeros(1, 32, 3, 224, 224))
    out = vexp("info", os.path.join(K400, "i3d_r50_311_32f.toml"), "--input", "32x3x224x224", "--classes", "400",
               "--json", stdout_only=True)
    j = json.loads(out)
    print("i3d 32x224^2: vexp %d, PyTorch reference %d" % (j["flops_per_clip"], ref))
    if j["flops_per_clip"] != ref:
        sys.exit("FAIL: I3D MACs at 224^2 differ from the PyTorch reference count")
    ref333 = R.count_macs(R.I3D(400, style333=True), torch.zeros(1, 32, 3, 224, 224))
    out = vexp("info", os.path.join(K400, "i3d_r50_333_32f.toml"), "--input", "32x3x224x224", "--classes", "400",
               "--json", stdout_only=True)
    j = json.loads(out)
    print("i3d 3x3x3 32x224^2: vexp %d params %d, PyTorch reference %d params %d" %
          (j["flops_per_clip"], j["params"], ref333, sum(p.numel() for p in R.I3D(400, style333=True).parameters())))
    if j["flops_per_clip"] != ref333:
        sys.exit("FAIL: I3D 3x3x3 MACs differ from the PyTorch reference count")


def lamb_reference(params, grads_per_step, lrs, groups, betas, eps, bias_correction, always_adapt, trust_clip):
    """LAMB (You et al. 2019) as timm's Lamb and NVIDIA's FusedLAMB compute it (without
    their own gradient clipping), written here from the paper's rule: Adam moments,
    u = m_hat / (sqrt(v_hat) + eps) + wd * w, trust ratio |w| / |u| per tensor (1 when
    either norm is 0), applied where the group's weight decay is not 0 (or always)."""
    b1, b2 = betas
    state = {}
    for s, lr in enumerate(lrs):
        for g in groups:
            glr, wd = lr * g["lr_mult"], g["weight_decay"]
            for n in g["params"]:
                grad = grads_per_step[s].get(n)
                if grad is None:
                    continue
                w = params[n]
                st = state.setdefault(n, {"step": 0, "exp_avg": torch.zeros_like(w), "exp_avg_sq": torch.zeros_like(w)})
                st["step"] += 1
                t = st["step"]
                st["exp_avg"] = st["exp_avg"] * b1 + (1 - b1) * grad
                st["exp_avg_sq"] = st["exp_avg_sq"] * b2 + (1 - b2) * grad * grad
                c1 = 1 - b1 ** t if bias_correction else 1.0
                c2 = 1 - b2 ** t if bias_correction else 1.0
                u = (st["exp_avg"] / c1) / ((st["exp_avg_sq"] / c2).sqrt() + eps)
                if wd != 0:
                    u = u + wd * w
                ratio = 1.0
                if wd != 0 or always_adapt:
                    wn, un = w.norm().item(), u.norm().item()
                    ratio = wn / un if wn > 0 and un > 0 else 1.0
                    if trust_clip:
                        ratio = min(ratio, 1.0)
                params[n] = w - glr * ratio * u
    return params, state


def test_optimizers():
    """The optimizer plugins over the same parameters and gradients as torch.optim.AdamW
    and torch.optim.SGD (and a LAMB reference written above): two groups with their own
    lr multiplier and weight decay, a changing lr, a channels-last weight, a parameter
    without a gradient in one step; the parameters after 6 steps and the optimizer's
    state must agree to float tolerance."""
    program = sys.argv[4]
    torch.manual_seed(0)
    shapes = {"conv.weight": (4, 3, 3, 3), "conv.bias": (4,), "fc.weight": (5, 8), "fc.bias": (5,), "bn.weight": (8,)}
    init = {n: torch.randn(*s) for n, s in shapes.items()}
    init["conv.weight"] = init["conv.weight"].contiguous(memory_format=torch.channels_last)
    steps = 6
    grads = [{n: torch.randn(*s) for n, s in shapes.items()} for _ in range(steps)]
    del grads[2]["bn.weight"]  # no gradient in step 2: neither stepped nor counted
    lrs = [0.01 * (1 - s / steps) + 1e-3 for s in range(steps)]
    groups = [{"name": "decay", "lr_mult": 1.0, "weight_decay": 0.05, "params": ["conv.weight", "fc.weight"]},
              {"name": "no_decay", "lr_mult": 2.0, "weight_decay": 0.0, "params": ["conv.bias", "fc.bias", "bn.weight"]}]

    def run_vexp(name, params):
        src = {"format": "vexp-checkpoint-1", "model": init,
               "optimizer": {"%d/%s" % (s, n): g for s, gs in enumerate(grads) for n, g in gs.items()},
               "meta": json.dumps({"optimizer": name, "params": params, "lrs": lrs, "groups": groups})}
        torch.save(src, path("optim_in.pt"))
        p = subprocess.run([program, path("optim_in.pt"), path("optim_out.pt")], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("FAIL: vexp_optim_parity %s: %s" % (name, p.stdout + p.stderr))
        out = torch.load(path("optim_out.pt"))
        return out["model"], out["optimizer"]

    def run_torch(make):
        ps = {n: init[n].clone().requires_grad_(True) for n in shapes}
        opt = make([{"params": [ps[n] for n in g["params"]], "lr": lrs[0] * g["lr_mult"],
                     "weight_decay": g["weight_decay"]} for g in groups])
        for s in range(steps):
            for n, t in ps.items():
                t.grad = grads[s][n].clone() if n in grads[s] else None
            for pg, g in zip(opt.param_groups, groups):
                pg["lr"] = lrs[s] * g["lr_mult"]
            opt.step()
        return ps, opt

    def close(what, got, ref, tol=2e-6):
        err = (got.double() - ref.double()).abs().max().item()
        scale = max(ref.double().abs().max().item(), 1e-12)
        print("  %-34s max |diff| %.2e (scale %.2e)" % (what, err, scale))
        if got.shape != ref.shape or not err / scale <= tol:
            sys.exit("FAIL: %s differs from the reference" % what)

    for amsgrad in (False, True):
        print("adamw (amsgrad=%s) vs torch.optim.AdamW" % amsgrad)
        got, state = run_vexp("adamw", {"betas": [0.85, 0.995], "eps": 1e-7, "amsgrad": amsgrad})
        ref, opt = run_torch(lambda g: torch.optim.AdamW(g, betas=(0.85, 0.995), eps=1e-7, amsgrad=amsgrad))
        for n in shapes:
            close("param " + n, got[n], ref[n].detach())
            st = opt.state[ref[n]]
            close("exp_avg/" + n, state["exp_avg/" + n], st["exp_avg"])
            close("exp_avg_sq/" + n, state["exp_avg_sq/" + n], st["exp_avg_sq"])
            if amsgrad:
                close("max_exp_avg_sq/" + n, state["max_exp_avg_sq/" + n], st["max_exp_avg_sq"])
            if int(state["step/" + n]) != int(st["step"]):
                sys.exit("FAIL: step count of %s: %d vs torch %d" % (n, int(state["step/" + n]), int(st["step"])))
        if int(state["step/bn.weight"]) != steps - 1:
            sys.exit("FAIL: bn.weight had no gradient in one step and must have stepped %d times" % (steps - 1))

    for momentum, nesterov in ((0.9, False), (0.9, True), (0.0, False)):
        print("sgd (momentum=%s nesterov=%s) vs torch.optim.SGD" % (momentum, nesterov))
        got, state = run_vexp("sgd", {"momentum": momentum, "nesterov": nesterov})
        ref, opt = run_torch(lambda g: torch.optim.SGD(g, lr=lrs[0], momentum=momentum, nesterov=nesterov))
        for n in shapes:
            close("param " + n, got[n], ref[n].detach())
            if momentum:
                close("momentum " + n, state[n], opt.state[ref[n]]["momentum_buffer"])

    for opts in ({}, {"always_adapt": True, "trust_clip": True}, {"bias_correction": False, "betas": [0.9, 0.99]}):
        full = {"betas": [0.9, 0.999], "eps": 1e-6, "bias_correction": True, "always_adapt": False, "trust_clip": False}
        full.update(opts)
        print("lamb %s vs the reference" % json.dumps(opts))
        got, state = run_vexp("lamb", full)
        ref, ref_state = lamb_reference({n: t.clone().double() for n, t in init.items()},
                                        [{n: g.double() for n, g in gs.items()} for gs in grads], lrs, groups,
                                        full["betas"], full["eps"], full["bias_correction"], full["always_adapt"],
                                        full["trust_clip"])
        for n in shapes:
            close("param " + n, got[n], ref[n], tol=1e-5)
            close("exp_avg/" + n, state["exp_avg/" + n], ref_state[n]["exp_avg"], tol=1e-5)
            if int(state["step/" + n]) != ref_state[n]["step"]:
                sys.exit("FAIL: lamb step count of " + n)


globals()["test_" + NAME]()
print("PASS", NAME)
