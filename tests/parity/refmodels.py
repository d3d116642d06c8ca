"""Reference PyTorch models for vexp's parity tests, written for these tests
(torch only; torchvision where the test is about torchvision itself).

- TSN/TSM after the official TSM code's semantics: the backbone's fc replaced by
  dropout, `new_fc` on each frame, the average of the frames' scores (TSN
  consensus); TSM wraps each residual block's conv1 in a shift module (`.net`)
  that builds its output from zeros and slice copies.
- I3D after mmaction2's ResNet3d layout, with its ConvModule names
  (conv1.conv, conv1.bn, layer1.0.conv1.conv, downsample.conv/bn, cls_head.fc_cls).
- mmaction2's 2D recognizers (TSN-R50, TSM-R50) after its module structure:
  mmaction/models/backbones/resnet.py builds every convolution as an mmcv
  ConvModule (`.conv` and its norm `.bn`; the stem conv1, each block's conv1..3
  and downsample), resnet_tsm.py wraps each block's *inner* convolution in the
  shift (`blocks[i].conv1.conv = TemporalShift(b.conv1.conv, ...)`, which keeps it
  as `.net`), and heads/tsn_head.py / tsm_head.py name the classifier `fc_cls`.
- A MAC counter in mmcv's get_model_complexity_info convention.
"""
import torch
import torch.nn as nn


class TemporalShift(nn.Module):
    def __init__(self, net, n_segment, fold_div=8):
        super().__init__()
        self.net = net
        self.n_segment = n_segment
        self.fold_div = fold_div

    def forward(self, x):
        nt, c, h, w = x.size()
        n = nt // self.n_segment
        x = x.view(n, self.n_segment, c, h, w)
        fold = c // self.fold_div
        out = torch.zeros_like(x)
        out[:, :-1, :fold] = x[:, 1:, :fold]                  # shift left (from the next frame)
        out[:, 1:, fold:2 * fold] = x[:, :-1, fold:2 * fold]  # shift right (from the previous frame)
        out[:, :, 2 * fold:] = x[:, :, 2 * fold:]             # not shifted
        return self.net(out.view(nt, c, h, w))


class TSN(nn.Module):
    """base: a torchvision-style ResNet. Input [N, T, C, H, W]."""

    def __init__(self, base, num_class, num_segments, shift=False, fold_div=8, dropout=0.5):
        super().__init__()
        self.base_model = base
        feature_dim = base.fc.in_features
        base.fc = nn.Dropout(p=dropout)
        self.new_fc = nn.Linear(feature_dim, num_class)
        self.num_segments = num_segments
        if shift:
            for layer in (base.layer1, base.layer2, base.layer3, base.layer4):
                for block in layer:
                    block.conv1 = TemporalShift(block.conv1, num_segments, fold_div)

    def forward(self, x):
        n, t = x.shape[:2]
        out = self.new_fc(self.base_model(x.reshape(n * t, *x.shape[2:])))
        return out.view(n, t, -1).mean(1)


class ConvModule2d(nn.Module):
    """mmcv's ConvModule with a BatchNorm: `conv`, `bn` (the norm's name for BN), activation without weights."""

    def __init__(self, cin, cout, k, s=1, p=0, act=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, p, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.activate = nn.ReLU(inplace=True) if act else None

    def forward(self, x):
        x = self.bn(self.conv(x))
        return self.activate(x) if self.activate is not None else x


class MMBasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride, downsample):
        super().__init__()
        self.conv1 = ConvModule2d(cin, planes, 3, stride, 1)
        self.conv2 = ConvModule2d(planes, planes, 3, 1, 1, act=False)
        self.downsample = downsample
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(self.conv2(self.conv1(x)) + identity)


class MMBottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride, downsample):
        super().__init__()
        self.conv1 = ConvModule2d(cin, planes, 1)
        self.conv2 = ConvModule2d(planes, planes, 3, stride, 1)  # style 'pytorch': the stride on the 3x3
        self.conv3 = ConvModule2d(planes, planes * 4, 1, act=False)
        self.downsample = downsample
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + identity)


class MMResNet(nn.Module):
    """mmaction2's 2D ResNet (ResNet(depth), torchvision-style stages); `cifar_stem`: a 3x3 stride-1 stem and no
    max pool, as vexp's `stem = "cifar"` (not an mmaction2 option: for the small test models only).
    `shift_segments` > 0: ResNetTSM, shift_place 'blockres' (every block's conv1.conv wrapped)."""

    def __init__(self, depth=50, in_channels=3, cifar_stem=False, shift_segments=0, fold_div=8):
        super().__init__()
        block, counts = {18: (MMBasicBlock, (2, 2, 2, 2)), 34: (MMBasicBlock, (3, 4, 6, 3)),
                         50: (MMBottleneck, (3, 4, 6, 3)), 101: (MMBottleneck, (3, 4, 23, 3))}[depth]
        if cifar_stem:
            self.conv1 = ConvModule2d(in_channels, 64, 3, 1, 1)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = ConvModule2d(in_channels, 64, 7, 2, 3)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, n in enumerate(counts):
            planes, stride = 64 * 2 ** i, 1 if i == 0 else 2
            downsample = None
            if stride != 1 or cin != planes * block.expansion:
                downsample = ConvModule2d(cin, planes * block.expansion, 1, stride, act=False)
            layer = [block(cin, planes, stride, downsample)]
            cin = planes * block.expansion
            layer += [block(cin, planes, 1, None) for _ in range(1, n)]
            self.add_module("layer%d" % (i + 1), nn.Sequential(*layer))
        self.feat_dim = cin
        if shift_segments:
            for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
                for b in layer:
                    b.conv1.conv = TemporalShift(b.conv1.conv, shift_segments, fold_div)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class MMHead2d(nn.Module):
    """TSNHead / TSMHead at test time: average pool, `fc_cls`, the average over segments (both heads' dropout is
    off in eval; TSN averages features before fc_cls, TSM scores after: the same for a linear layer)."""

    def __init__(self, num_classes, in_channels):
        super().__init__()
        self.fc_cls = nn.Linear(in_channels, num_classes)

    def forward(self, x, segments):
        score = self.fc_cls(x.mean((2, 3)))
        return score.view(-1, segments, score.shape[-1]).mean(1)


class MMRecognizer2D(nn.Module):
    """mmaction2's Recognizer2D: `backbone` + `cls_head`. Input [N, T, C, H, W]."""

    def __init__(self, num_classes, segments, depth=50, shift=False, **kw):
        super().__init__()
        self.segments = segments
        self.backbone = MMResNet(depth, shift_segments=segments if shift else 0, **kw)
        self.cls_head = MMHead2d(num_classes, self.backbone.feat_dim)

    def forward(self, x):
        n, t = x.shape[:2]
        return self.cls_head(self.backbone(x.reshape(n * t, *x.shape[2:])), t)


class ConvModule(nn.Module):
    def __init__(self, cin, cout, k, s, p, act=True):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, k, s, p, bias=False)
        self.bn = nn.BatchNorm3d(cout)
        self.activate = nn.ReLU(inplace=True) if act else None

    def forward(self, x):
        x = self.bn(self.conv(x))
        return self.activate(x) if self.activate is not None else x


class Bottleneck3d(nn.Module):
    def __init__(self, cin, planes, stride, downsample, inflate, style333):
        super().__init__()
        if inflate and not style333:
            k1, p1, k2, p2 = (3, 1, 1), (1, 0, 0), (1, 3, 3), (0, 1, 1)
        elif inflate:
            k1, p1, k2, p2 = (1, 1, 1), (0, 0, 0), (3, 3, 3), (1, 1, 1)
        else:
            k1, p1, k2, p2 = (1, 1, 1), (0, 0, 0), (1, 3, 3), (0, 1, 1)
        self.conv1 = ConvModule(cin, planes, k1, 1, p1)
        self.conv2 = ConvModule(planes, planes, k2, (1, stride, stride), p2)
        self.conv3 = ConvModule(planes, planes * 4, 1, 1, 0, act=False)
        self.downsample = ConvModule(cin, planes * 4, 1, (1, stride, stride), 0, act=False) if downsample else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + identity)


class ResNet3d(nn.Module):
    def __init__(self, depth=50, inflate=((1, 1, 1), (1, 0, 1, 0), (1, 0, 1, 0, 1, 0), (0, 1, 0)), style333=False,
                 conv1_kernel_t=5, conv1_stride_t=2, pool1_stride_t=2, with_pool2=True):
        super().__init__()
        blocks = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}[depth]
        self.conv1 = ConvModule(3, 64, (conv1_kernel_t, 7, 7), (conv1_stride_t, 2, 2),
                                ((conv1_kernel_t - 1) // 2, 3, 3))
        self.maxpool = nn.MaxPool3d((1, 3, 3), (pool1_stride_t, 2, 2), (0, 1, 1))
        self.pool2 = nn.MaxPool3d((2, 1, 1), (2, 1, 1)) if with_pool2 else None
        cin = 64
        for i, n in enumerate(blocks):
            planes = 64 * 2 ** i
            layer = []
            for b in range(n):
                stride = 2 if (i > 0 and b == 0) else 1
                inf = inflate[i][b % len(inflate[i])]
                layer.append(Bottleneck3d(cin, planes, stride, b == 0, inf, style333))
                cin = planes * 4
            self.add_module("layer%d" % (i + 1), nn.Sequential(*layer))

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.layer1(x)
        if self.pool2 is not None:
            x = self.pool2(x)
        return self.layer4(self.layer3(self.layer2(x)))


class I3DHead(nn.Module):
    def __init__(self, num_classes, in_channels=2048, dropout=0.5):
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc_cls = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        return self.fc_cls(self.dropout(self.avg_pool(x)).flatten(1))


class I3D(nn.Module):
    """Input [N, T, C, H, W] (vexp's clip layout), as mmaction2's Recognizer3D after its reshape."""

    def __init__(self, num_classes, **kw):
        super().__init__()
        self.backbone = ResNet3d(**kw)
        self.cls_head = I3DHead(num_classes)

    def forward(self, x):
        return self.cls_head(self.backbone(x.transpose(1, 2)))


def count_macs(model, x):
    """Multiply-adds in mmcv's get_model_complexity_info convention."""
    total = [0]

    def hook(m, inp, out):
        i = inp[0]
        if isinstance(m, (nn.Conv2d, nn.Conv3d)):
            k = 1
            for s in m.kernel_size:
                k *= s
            total[0] += out.numel() * (m.in_channels // m.groups) * k + (out.numel() if m.bias is not None else 0)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
            total[0] += i.numel() * (2 if m.affine else 1)
        elif isinstance(m, nn.ReLU):
            total[0] += out.numel()
        elif isinstance(m, (nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)):
            total[0] += i.numel()
        elif isinstance(m, nn.Linear):
            total[0] += i.numel() * out.shape[-1]

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    model.eval()
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return total[0]


def randomise(model, seed):
    """Non-trivial weights and BatchNorm statistics (so that eval-mode BN matters)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.dtype != torch.float32:
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) * 0.5 + 0.75)
            elif name.endswith("running_mean"):
                t.copy_(torch.randn(t.shape, generator=g) * 0.1)
            elif name.endswith("bn.weight") or ".bn" in name and name.endswith("weight") or "bn" in name.split(".")[-2]:
                t.copy_(torch.rand(t.shape, generator=g) * 0.5 + 0.5)
            elif name.endswith("bias"):
                t.copy_(torch.randn(t.shape, generator=g) * 0.05)
            else:
                fan_in = t[0].numel() if t.dim() > 1 else 1
                t.copy_(torch.randn(t.shape, generator=g) * (2.0 / fan_in) ** 0.5)
    return model
