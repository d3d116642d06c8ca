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


def test_eval_protocol():
    """`vexp eval` against a PyTorch reference of the official TSM test (test_models.py and ops/ of
    mit-han-lab/temporal-shift-module, written here from its protocol): the test indices (TSN segment centres
    int(tick / 2 + tick * i), twice_sample's segment starts, dense clips at np.linspace(0, nf - 64, 10) with a
    stride of 64 // T), GroupScale to the scale size, the crops (1 centre, 3 left/right/centre
    (GroupFullResSample), 10 corners + centre and their mirror images (GroupOverSample); --full_res: crops of the
    scale size), /255 and the ImageNet mean and std, TSM-R50 on each view, the views' logits averaged per video.
    vexp's per-video logits (--logits) equal the reference's to float tolerance for 10 clips x 3 crops at full
    resolution (the paper's 74.1 protocol), 1 clip x 1 crop (the 71.2 protocol), twice_sample x 10 crops, and 10
    crops made by the recipe's [[data.test_transforms]] (test_crops, normalize) instead of the dataset's own."""
    import av
    import numpy as np
    T, SCALE, INPUT = 8, 40, 32
    H, W = SCALE, 56  # the short side is the scale: see below
    root = path("data")
    os.makedirs(os.path.join(root, "vid"))
    # The videos are lossless RGB (PNG frames in AVI): PyAV here and vexp's FFmpeg + swscale decode exactly the
    # bytes written (no YUV conversion, whose rounding differs between the two). Their short side is already the
    # test scale, so GroupScale is the identity and the official resize-then-crop takes the same pixels as vexp's
    # crop resized straight to the output (a same-size swscale pass is a copy); W - crop and H - crop are
    # multiples of 4, so even the rounding of the crop offsets is not what is compared. What is compared is the
    # sampling, the crop offsets and flips, the normalisation, the model and the averaging, to 1e-4.
    rng = np.random.RandomState(0)
    videos, lines = [], []
    for v, (nf, label) in enumerate(((80, 3), (71, 17), (96, 399))):
        yy, xx = np.mgrid[0:H, 0:W]
        frames = []
        for t in range(nf):
            base = np.stack([(xx * 4 + t * 7 + v * 40) % 256, (yy * 5 + t * 3) % 256, ((xx + 2 * yy) * 3 + t) % 256], -1)
            frames.append(np.clip(base + rng.randint(-40, 41, base.shape), 0, 255).astype(np.uint8))
        name = "vid/v%d.avi" % v
        c = av.open(os.path.join(root, name), "w")
        st = c.add_stream("png", rate=25)
        st.width, st.height, st.pix_fmt = W, H, "rgb24"
        for f in frames:
            for pkt in st.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(pkt)
        for pkt in st.encode():
            c.mux(pkt)
        c.close()
        decoded = [f.to_ndarray(format="rgb24") for f in av.open(os.path.join(root, name)).decode(video=0)]
        assert len(decoded) == nf and all((a == b).all() for a, b in zip(decoded, frames)), "PyAV does not give back the frames"
        videos.append((decoded, label))
        lines.append("%s %d\n" % (name, label))
    with open(os.path.join(root, "list.txt"), "w") as f:
        f.writelines(lines)

    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def indices(nf, sampling, clips, twice):
        if sampling == "dense":  # the official dense test: 64-frame windows, 10 starts over [0, nf - 64]
            stride = 64 // T
            starts = np.linspace(0, max(1, 1 + nf - 64) - 1, num=clips, dtype=int)
            return [[(i * stride + int(s)) % nf for i in range(T)] for s in starts]
        tick = nf / float(T)
        if clips == 1:
            out = [[int(tick / 2.0 + tick * i) for i in range(T)]]
        else:  # vexp's generalisation: the centres shifted by (c + 0.5) / clips of a segment
            out = [[int(tick * (c + 0.5) / clips + tick * i) for i in range(T)] for c in range(clips)]
        if twice:
            out.append([int(tick * i) for i in range(T)])
        return out

    def group_scale(clip):  # [T, 3, h, w] floats: the short side to SCALE (torchvision's Resize)
        h, w = clip.shape[2:]
        if min(h, w) == SCALE:
            return clip  # PIL's resize to the same size is a copy
        size = (int(SCALE * h / w), SCALE) if w <= h else (SCALE, int(SCALE * w / h))
        return torch.nn.functional.interpolate(clip, size=size, mode="bilinear", align_corners=False)

    def offsets(h, w, crop, crops):
        if crops == 1:  # GroupCenterCrop: torchvision's CenterCrop
            return [(int(round((w - crop) / 2.0)), int(round((h - crop) / 2.0)), False)]
        ws, hs = (w - crop) // 4, (h - crop) // 4
        if crops == 3:  # GroupFullResSample(flip=False): left, right, centre
            return [(0, 2 * hs, False), (4 * ws, 2 * hs, False), (2 * ws, 2 * hs, False)]
        # GroupOverSample: upper left, upper right, lower left, lower right, centre; each then mirrored
        return [(x, y, f) for x, y in ((0, 0), (4 * ws, 0), (0, 4 * hs), (4 * ws, 4 * hs), (2 * ws, 2 * hs))
                for f in (False, True)]

    def views(frames, sampling, clips, crops, twice, full_res):
        crop = SCALE if full_res else INPUT  # --full_res: input_size = scale_size
        out = []
        for idx in indices(len(frames), sampling, clips, twice):
            clip = group_scale(torch.tensor(np.stack([frames[i] for i in idx])).permute(0, 3, 1, 2).float())
            for x, y, flip in offsets(clip.shape[2], clip.shape[3], crop, crops):
                c = clip[:, :, y:y + crop, x:x + crop]
                if flip:
                    c = c.flip(3)
                out.append((c / 255.0 - mean) / std)
        return torch.stack(out)  # [views, T, 3, crop, crop]

    m = tsn_reference(True, 8)
    w = path("tsm_official.pth")
    torch.save({"epoch": 50, "state_dict": {"module." + k: v for k, v in m.state_dict().items()}}, w)
    recipe = os.path.join(K400, "tsm_r50_8f.toml")
    common = ["--weights", w, "--logits", "--set", "data.params.root=" + root, "--set", "data.params.train_list=list.txt",
              "--set", "data.params.val_list=list.txt", "--set", "data.params.format=mmaction",
              "--set", "data.params.input_size=%d" % INPUT, "--set", "data.params.scale_size=%d" % SCALE,
              "--set", "run.threads=2", "--set", "data.workers=2"]
    # The recipe's test pipeline as transform plugins ([[data.test_transforms]]) makes the same views.
    piped = path("tsm_test_transforms.toml")
    with open(piped, "w") as f:
        f.write('extends = "%s"\n\n[[data.test_transforms]]\ntype = "test_crops"\ncrops = 10\nscale_size = %d\n\n'
                '[[data.test_transforms]]\ntype = "normalize"\n' % (os.path.abspath(recipe), SCALE))
    cases = (("dense", 10, 3, False, True, "dense-10x3-fullres", recipe),
             ("tsn", 1, 1, False, False, "tsn-1x1", recipe),
             ("tsn", 1, 10, True, False, "tsn-1x10-twice", recipe),
             ("tsn", 1, 10, False, False, "tsn-1x10", piped))
    for sampling, clips, crops, twice, full_res, name, rec in cases:
        out = path("eval_" + name)
        vexp("eval", rec, *common, "--out", out, "--set", "data.params.sampling=" + sampling,
             "--set", "data.params.frame_interval=8", "--set", "data.params.test_clips=%d" % clips,
             "--set", "data.params.test_crops=%d" % (1 if rec == piped else crops),
             "--set", "data.params.twice_sample=%s" % str(twice).lower(),
             "--set", "data.params.test_full_res=%s" % str(full_res).lower())
        with open(os.path.join(out, "eval.json")) as f:
            ej = json.load(f)
        saved = torch.load(os.path.join(out, "logits.pt"))
        got = saved["logits"].double()
        with torch.no_grad():
            ref = torch.stack([m(views(fr, sampling, clips, crops, twice, full_res)).mean(0) for fr, _ in videos])
        nviews = len(indices(80, sampling, clips, twice)) * crops
        print("%s: %d views per video, vexp's protocol %s with %s views" % (name, nviews, ej["protocol"]["name"],
                                                                          ej["protocol"]["views"]))
        if ej["protocol"]["name"] != name or ej["protocol"]["views"] != nviews or \
                (rec == piped) != ("test_transforms" in ej["protocol"]):
            sys.exit("FAIL: eval.json's protocol is %s" % ej["protocol"])
        compare("vexp eval %s: per-video logits vs the official test pipeline" % name, got, ref)
        err = (got - ref.double()).abs().max().item()
        if err > 1e-4 * max(1.0, ref.abs().max().item()):
            sys.exit("FAIL: %s: max abs difference %.3e" % (name, err))
        labels = torch.tensor([lab for _, lab in videos])
        if saved["labels"].tolist() != labels.tolist() or not bool(saved["evaluated"].all()):
            sys.exit("FAIL: %s: logits.pt labels %s, evaluated %s" % (name, saved["labels"], saved["evaluated"]))
        top1 = (ref.argmax(1) == labels).double().mean().item()
        top5 = sum(int(l in r.topk(5).indices.tolist()) for r, l in zip(ref, labels.tolist())) / 3.0
        if abs(ej["top1"] - top1) > 1e-9 or abs(ej["top5"] - top5) > 1e-9 or ej["videos"] != 3 or ej["failed"] != 0:
            sys.exit("FAIL: %s: eval.json top-1 %s top-5 %s, the reference's %s %s" % (name, ej["top1"], ej["top5"],
                                                                                   top1, top5))


def test_transforms_ops():
    """The clip transforms' pixel operations (plugins/transforms/clip/image_ops.cpp)
    against torchvision 0.14's functional, one frame at a time: colour jitter and
    grayscale on float frames, every RandAugment op on uint8 frames at magnitudes of
    torchvision's table, and that table itself."""
    import numpy as np
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import RandAugment, _apply_op
    tool = os.path.join(os.path.dirname(os.path.abspath(VEXP)), "vexp_transform_ops")

    def run(op, value, img, dtype):
        C, H, W = img.shape
        inp, out = path("in.raw"), path("out.raw")
        img.contiguous().numpy().tofile(inp)
        p = subprocess.run([tool, op, repr(float(value)), str(C), str(H), str(W), inp, out], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("FAIL: vexp_transform_ops %s: %s" % (op, p.stdout + p.stderr))
        return torch.from_numpy(np.fromfile(out, dtype=dtype))

    g = torch.Generator().manual_seed(7)
    # A noisy frame and a smooth one (gradients and a disc), RGB and gray, odd sizes.
    yy, xx = torch.meshgrid(torch.arange(37.0), torch.arange(53.0), indexing="ij")
    smooth = torch.stack([xx / 52 * 255, yy / 36 * 255, ((xx - 26) ** 2 + (yy - 18) ** 2 < 150).float() * 200 + 20])
    frames = [torch.randint(0, 256, (3, 37, 53), generator=g, dtype=torch.uint8), smooth.round().to(torch.uint8),
              torch.randint(0, 256, (1, 24, 31), generator=g, dtype=torch.uint8), torch.full((3, 9, 11), 77, dtype=torch.uint8)]
    worst = 0.0
    for img8 in frames:
        img = img8.float() / 255
        C = img.shape[0]
        cases = [("brightness", 0.3, lambda x, v: F.adjust_brightness(x, v)), ("brightness", 1.7, lambda x, v: F.adjust_brightness(x, v)),
                 ("contrast", 0.5, lambda x, v: F.adjust_contrast(x, v)), ("contrast", 1.6, lambda x, v: F.adjust_contrast(x, v)),
                 ("saturation", 0.2, lambda x, v: F.adjust_saturation(x, v)), ("saturation", 1.9, lambda x, v: F.adjust_saturation(x, v)),
                 ("hue", 0.23, lambda x, v: F.adjust_hue(x, v)), ("hue", -0.41, lambda x, v: F.adjust_hue(x, v)),
                 ("grayscale", 0, lambda x, v: F.rgb_to_grayscale(x, num_output_channels=C))]
        for op, v, ref in cases:
            want = ref(img, v).reshape(-1)
            got = run(op, v, img, np.float32)
            d = (got - want).abs().max().item()
            worst = max(worst, d)
            if not d <= 2e-6:
                sys.exit("FAIL: %s(%g) on a %s frame differs from torchvision by %g" % (op, v, tuple(img.shape), d))
    print("colour jitter and grayscale (float): max |diff| %.2e" % worst)

    names = {"identity": "Identity", "shear_x": "ShearX", "shear_y": "ShearY", "translate_x": "TranslateX",
             "translate_y": "TranslateY", "rotate": "Rotate", "brightness": "Brightness", "color": "Color",
             "contrast": "Contrast", "sharpness": "Sharpness", "posterize": "Posterize", "solarize": "Solarize",
             "autocontrast": "AutoContrast", "equalize": "Equalize"}
    geometric = {"shear_x", "shear_y", "translate_x", "translate_y", "rotate"}
    mismatched = total = 0
    for img8 in frames:
        C, H, W = img8.shape
        space = RandAugment()._augmentation_space(31, (H, W))
        for ours, theirs in names.items():
            mags, signed = space[theirs]
            for b in (0, 5, 9, 20, 30):
                m = float(mags[b].item()) if mags.ndim > 0 else 0.0
                for sign in ((1, -1) if signed else (1,)):
                    for interp in (("nearest", "bilinear") if ours in geometric else ("nearest",)):
                        mode = InterpolationMode.NEAREST if interp == "nearest" else InterpolationMode.BILINEAR
                        want = _apply_op(img8, theirs, sign * m, interpolation=mode, fill=None).reshape(-1)
                        got = run("ra_" + ours + ("_bilinear" if interp == "bilinear" else ""), sign * m, img8, np.uint8)
                        diff = (got.int() - want.int()).abs()
                        if ours in geometric:
                            # The same grid to float rounding: a pixel whose source lies on a
                            # rounding boundary may take its neighbour. Which neighbour a tie
                            # takes in torchvision follows the BLAS's summation order in torch's
                            # bmm (vexp's grid does not use the BLAS): shear_y(0.2, nearest) on
                            # 37 x 53 flips 63 of 5,883 pixels (1.1 %) against Debian's reference
                            # BLAS, fewer against OpenBLAS; a wrong grid moves most pixels.
                            bad = int((diff > (1 if interp == "bilinear" else 0)).sum())
                            mismatched += bad
                            total += diff.numel()
                            if bad > max(2, diff.numel() // 50):
                                sys.exit("FAIL: %s(%g, %s) on %s: %d of %d pixels differ from torchvision" %
                                         (ours, sign * m, interp, tuple(img8.shape), bad, diff.numel()))
                        elif int(diff.max()) != 0:
                            sys.exit("FAIL: %s(%g) on %s differs from torchvision by up to %d levels" %
                                     (ours, sign * m, tuple(img8.shape), int(diff.max())))
    print("RandAugment ops (uint8): colour ops bit-identical; geometric ops: %d of %d pixels off by rounding" %
          (mismatched, total))

    # The magnitude table.
    for (H, W) in ((37, 53), (224, 224)):
        for bins in (31, 11):
            space = RandAugment()._augmentation_space(bins, (H, W))
            for ours, theirs in names.items():
                mags, _ = space[theirs]
                for b in range(bins):
                    want = float(mags[b].item()) if mags.ndim > 0 else 0.0
                    inp, out = path("in.raw"), path("mag.raw")
                    open(inp, "wb").close()
                    p = subprocess.run([tool, "ra_magnitude_" + ours, str(b), str(bins), str(H), str(W), inp, out],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit("FAIL: " + p.stdout + p.stderr)
                    got = float(np.fromfile(out, dtype=np.float64)[0])
                    if not abs(got - want) <= 1e-6 * max(1.0, abs(want)):
                        sys.exit("FAIL: magnitude of %s at bin %d of %d (%dx%d): %r, torchvision %r" %
                                 (ours, b, bins, H, W, got, want))
    print("RandAugment magnitude table: as torchvision's (to float rounding)")
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
