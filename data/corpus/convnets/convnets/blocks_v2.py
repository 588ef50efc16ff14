# Second version of the conv block (kept for old configs).
import torch.nn as nn


class ConvNormAct(nn.Sequential):

    def __init__(self, in_ch, out_ch, k=3, s=1, g=1):
        pad = (k - 1) // 2
        super(ConvNormAct, self).__init__(
            nn.Conv2d(in_ch, out_ch, k, s, pad, groups=g, bias=False),
            nn.BatchNorm2d(out_ch, momentum=0.1),
            nn.ReLU(inplace=True)
        )


class SqueezeExciteV2(nn.Module):
    def __init__(self, channels, reduction=4):
        super(SqueezeExciteV2, self).__init__()
        hidden = max(1, channels // reduction)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, hidden, 1)
        self.fc2 = nn.Conv2d(hidden, channels, 1)

    def forward(self, x):
        scale = self.pool(x)
        scale = self.fc2(self.fc1(scale).relu()).sigmoid()
        return x * scale
