import torch
import torch.nn as nn
import torch.nn.functional as F

SMOOTH = 1.0


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, alpha=0.25):
        super().__init__()
        self.gamma = gamma
        self.alpha = alpha

    def forward(self, logits, target):
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        p_t = p * target + (1 - p) * (1 - target)
        loss = ce * (1 - p_t) ** self.gamma
        a_t = self.alpha * target + (1 - self.alpha) * (1 - target)
        return (a_t * loss).mean()


class DiceLoss(nn.Module):
    def __init__(self, smooth=SMOOTH):
        super().__init__()
        self.smooth = smooth

    def forward(self, pred, target):
        pred = torch.sigmoid(pred).flatten(1)
        target = target.flatten(1)
        inter = (pred * target).sum(1)
        union = pred.sum(1) + target.sum(1)
        return 1 - ((2 * inter + self.smooth) / (union + self.smooth)).mean()


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, logits, target):
        return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()


class CosineEmbeddingLossLite(nn.Module):
    def __init__(self, margin=0.0):
        super().__init__()
        self.margin = margin

    def forward(self, a, b):
        cos = F.cosine_similarity(a, b, dim=-1)
        return torch.clamp(1 - cos - self.margin, min=0).mean()


class KLDivLossWithTemperature(nn.Module):
    def __init__(self, temperature=2.0):
        super().__init__()
        self.t = temperature

    def forward(self, student, teacher):
        s = F.log_softmax(student / self.t, dim=-1)
        t = F.softmax(teacher / self.t, dim=-1)
        return F.kl_div(s, t, reduction="batchmean") * self.t * self.t
