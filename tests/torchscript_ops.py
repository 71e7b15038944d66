#!/usr/bin/python3
"""TorchScript import of single ATen operators against PyTorch, one small module per operator
(or overload), traced and, for nn layers, scripted with Debian's torch 1.13:

    tests/torchscript_ops.py --onnxexec build/onnxexec [--filter REGEX] [--keep DIR]

Each module is checked as tests/torchscript_models.py checks a model: `onnxexec run file.pt`
and the converted `.onnx` (onnx.checker's full check) against torch.jit.load(file)(x), relative
L2 error <= 1e-5 on every output. The inputs are standard normal floats of the listed shapes;
integer operands are made inside the module from them, so that the traced archive holds the
operator under test. Exits 1 on any failure.
"""

import argparse
from typing import Dict, List, Optional
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torchscript_models as tm  # noqa: E402  (the checks and their result table)


def cases(torch):
    """(name, module or function, input shapes, kinds): functions are traced; modules are
    traced and scripted."""
    nn, F = torch.nn, torch.nn.functional
    i3 = lambda x: (x.abs() * 3).long()  # noqa: E731  small non-negative integers

    def inplace_views(x):  # writes through slices and selects reach the tensor they view
        y = x.clone()
        y[:, 0] = 0
        y[1, 2:4] += 1
        y[..., 1] = x[..., 0] * 3
        y[:, 1::2, 4:] *= -1
        return y

    def inplace_chain(x):  # in-place results dropped: the names still see the change
        y = x.clone()
        torch.relu_(y)
        y.add_(1).mul_(2)
        z = x * 2
        z[z > 1] = 0
        return y + z

    def inplace_unary(x):  # in-place forms of the unary ops, zero_, through a select too
        y = x.clone()
        y.abs_()
        y.exp_().neg_()
        z = x.clone()
        z.zero_()
        w = x.abs()
        w[0].sqrt_()
        w[1].clamp_(0.2, 0.8)
        return y + z + w

    def inplace_view_kinds(x):  # writes through narrow, chunk, diagonal and view reach y
        y = x.clone()
        y.narrow(1, 0, 2).mul_(-1)
        a, b = y.chunk(2, dim=2)
        b.add_(10)
        y[0].diagonal().zero_()
        y.view(-1)[:4].fill_(7)
        return y

    def inplace_no_alias(x):  # results of no-op forms are tensors of their own (review 29)
        y = x.clone()
        z = torch.cat([y])
        z.add_(1)
        w = torch.flip(y, [])
        w.mul_(2)
        c = torch.cumprod(y[:, :1], 1)
        c.sub_(3)
        return y + z + w + c

    def copy_then_fill(x):  # copy_ of a constant must not share its data (review 29)
        z = torch.ones(6)
        y = x[0, 0].clone()
        y.copy_(z)
        y.fill_(0.0)
        return x + z, y

    def setitem_dim1(x):  # y[:, idx] = v: index_put_ with None before the index
        y = x.clone()
        y[:, torch.tensor([1, 3])] = x[:, :2, :1] * 0 + torch.arange(6.)
        return y
    x3, x4, x5 = [(2, 5, 6)], [(2, 3, 8, 8)], [(1, 2, 3, 4, 4)]
    fn = [
        # math
        ("tan", lambda x: torch.tan(x * 0.5), x3), ("atan", torch.atan, x3),
        ("asin", lambda x: torch.asin(torch.tanh(x)), x3),
        ("acos", lambda x: torch.acos(torch.tanh(x)), x3),
        ("sinh_cosh", lambda x: torch.sinh(x) + torch.cosh(x), x3),
        ("asinh_atanh", lambda x: torch.asinh(x) + torch.atanh(torch.tanh(x) * 0.9), x3),
        ("acosh", lambda x: torch.acosh(x.abs() + 1), x3),
        ("sign", torch.sign, x3), ("round", lambda x: torch.round(x * 3), x3),
        ("round_decimals", lambda x: torch.round(x * 3, decimals=1), x3),
        ("trunc_frac", lambda x: torch.trunc(x * 3) * 10 + torch.frac(x * 3), x3),
        ("log1p_expm1", lambda x: torch.log1p(x.abs()) + torch.expm1(x), x3),
        ("log2_log10_exp2", lambda x: torch.log2(x.abs() + 1) + torch.log10(x.abs() + 1) + torch.exp2(x), x3),
        ("square", torch.square, x3),
        ("isnan_isinf", lambda x: torch.isnan(x / x.round()).float() + 2 * torch.isinf(1 / x.round()).float()
         + 4 * torch.isfinite(1 / x.round()).float(), x3),
        ("nan_to_num", lambda x: torch.nan_to_num(torch.log(x) / x.round(), nan=0.5, posinf=9.0), x3),
        ("maximum_minimum", lambda x: torch.maximum(x, x.flip(1)) + torch.minimum(x, 0.2 * x), x3),
        ("clamp_min_max", lambda x: x.clamp_min(0.1) + torch.clamp_max(x, -0.1) + x.clamp_min(x[:, :1]), x3),
        ("fmod_remainder", lambda x: torch.fmod(x * 5, 1.5) + torch.remainder(x * 4, 1.5), x3),
        ("atan2", lambda x: torch.atan2(x[:, :, :3], x[:, :, 3:]), x3),
        ("atan2_zero", lambda x: torch.atan2(x, torch.zeros_like(x)) + torch.atan2(x.round(), x.round()), x3),
        ("lerp", lambda x: torch.lerp(x, x * 2, 0.3) + torch.lerp(x, -x, torch.sigmoid(x)), x3),
        ("addcmul_addcdiv", lambda x: torch.addcmul(x, x, x, value=0.5) + torch.addcdiv(x, x, x.abs() + 1), x3),
        ("logical", lambda x: (torch.logical_and(x > 0, x < 0.5).float() + 2 * torch.logical_or(x > 1, x < -1).float()
                               + 4 * torch.logical_xor(x > 0, x > 0.5).float() + 8 * ((x > 0) ^ (x < 0.5)).float()), x3),
        ("bitwise_not", lambda x: (~(x > 0)).float() + (~i3(x)).float(), x3),
        # activations
        ("elu_selu_celu", lambda x: F.elu(x) + F.selu(x) + F.celu(x, 0.5) + F.elu(x, 0.3), x3),
        ("softplus", lambda x: F.softplus(x * 10, 2.0, 5.0) + F.softplus(x), x3),
        ("mish_logsigmoid", lambda x: F.mish(x) + F.logsigmoid(x * 30), x3),
        ("shrink_threshold", lambda x: F.hardshrink(x, 0.3) + F.softshrink(x, 0.3) + F.threshold(x, 0.1, 2.0), x3),
        ("glu", lambda x: F.glu(x, -1) + F.glu(x, 1)[:, :, :3].sum(), [(2, 4, 6)]),
        # reductions
        ("argmax_argmin", lambda x: x.argmax(-1) * 10 + torch.argmin(x, 2) + x.argmax()
         + torch.argmin(x, 1, keepdim=True).sum(), x3),
        ("cumsum", lambda x: torch.cumsum(x, 1) + torch.cumsum(i3(x), -1), x3),
        ("cumprod", lambda x: torch.cumprod(x, 1), x3),
        ("prod_amin", lambda x: x.prod(-1) + x.amin(-1) + x.amin((0, 2)).sum(), x3),
        ("logsumexp", lambda x: torch.logsumexp(x * 50, -1) + torch.logsumexp(x, (0, 1)).sum(), x3),
        ("count_nonzero", lambda x: torch.count_nonzero(x > 0, 1).float(), x3),
        ("norms", lambda x: x.norm(dim=-1) + torch.norm(x, p=1, dim=1).sum() + torch.norm(x, 3, -1)
         + torch.linalg.vector_norm(x, float("inf"), -1) + torch.linalg.vector_norm(x, 0, -1), x3),
        ("normalize", lambda x: F.normalize(x, dim=-1) + F.normalize(x, p=1, dim=1), x3),
        ("var_std", lambda x: x.var(-1) + x.std(1, keepdim=True).sum() + torch.var(x, -1, unbiased=False)
         + x.var() + torch.std(x, -1, correction=0), x3),
        ("var_mean_std_mean", lambda x: torch.var_mean(x, 1)[0] + torch.std_mean(x, 1, keepdim=True)[1], x3),
        # shapes and creation
        ("flip", lambda x: torch.flip(x, [1, 2]), x3),
        ("narrow_unbind", lambda x: x.narrow(1, 1, 3).sum(1) + torch.unbind(x, 1)[2], x3),
        ("movedim", lambda x: torch.movedim(x, 1, 2) + torch.movedim(x, (0, 1), (2, 0)).transpose(0, 1).transpose(1, 2), [(3, 3, 3)]),
        ("expand_view_as", lambda x: x[:, :1].expand_as(x) + x.reshape(10, 6).view_as(x) + x.reshape(60).reshape_as(x), x3),
        ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), x3),
        ("repeat_interleave_list", lambda x: x.repeat_interleave(torch.tensor([1, 0, 2, 1, 3]), dim=1), x3),
        ("tile", lambda x: x.tile((1, 2, 1)) + x.tile((2,)).sum(), x3),
        ("tril_triu", lambda x: torch.tril(x, 1) + x.triu(-1) * 2, x3),
        ("diagonal", lambda x: torch.diagonal(x, 0, 1, 2) + torch.diagonal(x, 1, 1, 2)[:, :1]
         + torch.diagonal(x, -2, 2, 1)[:, :1], x3),
        ("arange_linspace", lambda x: x + torch.arange(6) + torch.arange(1, 13, 2).float()
         + torch.linspace(-1, 1, 6) + torch.arange(0.5, 3.4, 0.5), x3),
        ("full_like_new_full", lambda x: torch.full_like(x, 2.0) + x.new_full((2, 5, 6), 3.0) * x
         + torch.empty_like(x).fill_(1), x3),
        ("eye_meshgrid", lambda x: x[0] @ torch.eye(6) + torch.meshgrid(torch.arange(5.), torch.arange(6.), indexing="ij")[0]
         + torch.meshgrid(torch.arange(6.), torch.arange(5.), indexing="xy")[1], x3),
        ("one_hot", lambda x: F.one_hot(i3(x).clamp(0, 3), 4).float(), x3),
        ("tensor_unfold", lambda x: x.unfold(2, 3, 2) + x.unfold(1, 2, 1)[:, :2, :, :3].sum(), x3),
        # ordering and indexing
        ("topk", lambda x: torch.topk(x, 2, -1)[0] + torch.topk(x, 2, -1, largest=False)[1].float()
         + torch.topk(x, 3, 1)[0].sum(), x3),
        ("sort_argsort", lambda x: torch.sort(x, -1, descending=True)[0] + torch.argsort(x, 1).float().sum(1, keepdim=True), x3),
        ("gather", lambda x: torch.gather(x, 2, i3(x).clamp(0, 5)), x3),
        ("scatter", lambda x: torch.zeros(2, 5, 6).scatter(2, i3(x[:, :, :2]).clamp(0, 5), x[:, :, 2:4])
         + torch.zeros(2, 5, 6).scatter(1, i3(x[:, :2]).clamp(0, 4), 1.5), x3),
        ("scatter_add", lambda x: torch.zeros(2, 5, 6).scatter_add(2, i3(x[:, :, :3]).clamp(0, 5), x[:, :, 3:]), x3),
        ("index_put", lambda x: x.index_put((torch.tensor([0, 1]),), torch.zeros(5, 6))
         + torch.index_put(x, (torch.tensor([4, 2]),), torch.tensor(2.0), accumulate=True), [(6, 5, 6)]),
        ("index_put_mask", lambda x: x.masked_fill(x > 0, 0.0) + torch.index_put(x, (x > 0.5,), torch.tensor(-1.0)), x3),
        ("index_fill", lambda x: x.clone().index_fill_(1, torch.tensor([1, -1]), 0.5), x3),
        ("setitem_dim1", setitem_dim1, x3),
        ("inplace_views", inplace_views, x3),
        ("inplace_chain", inplace_chain, x3),
        ("inplace_unary", inplace_unary, x3),
        ("inplace_view_kinds", inplace_view_kinds, x3),
        ("inplace_no_alias", inplace_no_alias, x3),
        ("copy_then_fill", copy_then_fill, x3),
        ("transposes", lambda x: x.T.permute(2, 1, 0) * 2 + x.mT.transpose(1, 2) + x.mH.mT + x.adjoint().mT, x3),
        ("bool_index_const", lambda x: x[:, torch.tensor([True, False, True, True, False])], x3),
        ("bucketize", lambda x: torch.bucketize(x, torch.tensor([-1., 0., 1.])).float()
         + 10 * torch.bucketize(x.round(), torch.tensor([-1., 0., 1.]), right=True).float(), x3),
        # linear algebra
        ("einsum", lambda x: torch.einsum("bij,bkj->bik", x, x) + torch.einsum("b i j -> b j i", x).sum(), x3),
        ("einsum_diag", lambda x: torch.einsum("bii->b", x[:, :5, :5]), x3),
        ("dot_mv_outer", lambda x: torch.dot(x[0, 0], x[0, 1]) + torch.mv(x[0], x[0, 0]).sum()
         + torch.outer(x[0, 0], x[0, 1]), x3),
        ("cross", lambda x: torch.cross(x[:, :3], x[:, 1:4], dim=1) + torch.linalg.cross(x[..., :3], x[..., 3:]).sum(), x3),
        ("cdist", lambda x: torch.cdist(x, x[:, :3]) + torch.cdist(x, x, p=1).sum(-1, keepdim=True)[:, :, :3], x3),
        ("cosine_pairwise", lambda x: F.cosine_similarity(x, x.flip(1), dim=-1) + F.pairwise_distance(x[0], x[1]).sum()
         + F.cosine_similarity(x[0], x[1]).sum(), x3),
        ("det", lambda x: torch.det(x[:, :5, :5]) + torch.linalg.det(x[:, :5, 1:]), x3),
        # vision
        ("upsample_modes", lambda x: F.interpolate(x, scale_factor=2, mode="bicubic")[:, :, :5, :5]
         + F.interpolate(x, size=(5, 5), mode="bicubic", align_corners=True)
         + F.interpolate(x, size=(5, 5), mode="nearest-exact"), x4),
        ("upsample_1d_3d", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear").sum((2, 3, 4))
         + F.interpolate(x, scale_factor=2, mode="nearest").sum((2, 3, 4))
         + F.interpolate(x[:, :, 0, 0], scale_factor=3, mode="linear").sum(-1)
         + F.interpolate(x[:, :, 0, 0], size=7, mode="nearest").sum(-1), x5),
        ("max_pool_indices", lambda x: F.max_pool2d(x, 2, return_indices=True)[1].float()
         + F.max_pool1d(x[:, 0], 3, 2, return_indices=True)[1].float().sum(), x4),
        ("max_unpool", lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), x4),
        ("circular_pad", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), x4),
        ("affine_grid_sample", lambda x: F.grid_sample(x, F.affine_grid(torch.tensor([[[0.9, 0.2, 0.1], [0.1, 0.8, 0.]]]).repeat(2, 1, 1),
                                                                         [2, 3, 5, 7], align_corners=False), align_corners=False), x4),
        ("grid_sample_modes", lambda x: F.grid_sample(x, torch.tanh(x[:, :2].permute(0, 2, 3, 1)), mode="nearest", padding_mode="border",
                                                      align_corners=True)
         + F.grid_sample(x, torch.tanh(x[:, 1:].permute(0, 2, 3, 1)), padding_mode="reflection"), x4),
        ("where_numbers", lambda x: torch.where(x > 0, 1.0, 0.0) + torch.where(x > 0.5, 2, 3), x3),
        # review 29's mismatches
        ("argmax_none_keepdim", lambda x: torch.argmax(x, dim=None, keepdim=True) + torch.argmin(x, None, True), x3),
        ("norm_except_dim_all", lambda x: torch.norm_except_dim(x, 2, -1) + torch.norm_except_dim(x, 2, 1).sum(), x3),
        ("cosine_small", lambda x: F.cosine_similarity(x * 1e-5, x * 1e-5, dim=1) + F.cosine_similarity(x * 1e-5, x, dim=2).sum(), x3),
        ("index_fill_empty", lambda x: x.index_fill(1, torch.zeros(0, dtype=torch.long), -1.0), x3),
        ("cumsum_dtype_int16", lambda x: torch.cumsum(i3(x) * 9000, 2, dtype=torch.int16), x3),  # wraps
        ("nearest_fractional", lambda x: F.interpolate(x, scale_factor=0.6, mode="nearest").sum((2, 3))
         + F.interpolate(x, scale_factor=1.7, mode="nearest-exact").sum((2, 3))
         + F.interpolate(x, size=(5, 11), mode="nearest").sum((2, 3)), x4),
        ("nll_one_sample", lambda x: F.nll_loss(F.log_softmax(x[0, :, 0], 0), i3(x[0, 0, 0]).clamp(0, 4)), x3),
        ("bitwise_not_uint8", lambda x: (~(x.abs() * 50).to(torch.uint8)).float(), x3),
        ("broadcast_tensors", lambda x: torch.broadcast_tensors(x[:, :1], x[0, :, :1], x[0, 0])[1], x3),
        # losses, element by element and reduced
        ("mse_l1_none", lambda x: F.mse_loss(x, x.flip(1), reduction="none") + F.l1_loss(x, -x, reduction="none"), x3),
        ("smooth_l1_huber", lambda x: F.smooth_l1_loss(x, x.flip(1) * 2, reduction="none", beta=0.5)
         + F.huber_loss(x, x.flip(2), reduction="none", delta=0.7) + F.smooth_l1_loss(x, 0 * x, beta=0.0, reduction="none"), x3),
        ("losses_reduced", lambda x: torch.stack([F.mse_loss(x, x.flip(1)), F.l1_loss(x, -x, reduction="sum"),
                                                  F.smooth_l1_loss(x, 2 * x), F.huber_loss(x, x.flip(2), reduction="sum")]), x3),
        ("cross_entropy", lambda x: F.cross_entropy(x, i3(x[:, 0]).clamp(0, 4), reduction="none")
         + F.cross_entropy(x, i3(x[:, 0]).clamp(0, 4), weight=torch.arange(1., 6.), ignore_index=2), [(3, 5, 6)]),
        ("cross_entropy_1d_probs", lambda x: F.cross_entropy(x[0, :, 0], i3(x[0, 0, 0]).clamp(0, 4)) * 10
         + F.cross_entropy(x[0], F.softmax(x[1], 0), reduction="none").sum(), [(2, 5, 6)]),
        ("nll", lambda x: F.nll_loss(F.log_softmax(x, 1), i3(x[:, 0]).clamp(0, 4), reduction="none")
         + F.nll_loss(F.log_softmax(x, 1), i3(x[:, 0]).clamp(0, 4), reduction="sum"), [(3, 5, 6)]),
        ("bce", lambda x: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(x.flip(1)), reduction="none")
         + F.binary_cross_entropy_with_logits(x, torch.sigmoid(x.flip(1)), reduction="none")
         + F.binary_cross_entropy_with_logits(x, torch.sigmoid(x.flip(2)), pos_weight=torch.arange(1., 7.),
                                              weight=torch.full((6,), 0.5)), x3),
        ("kl_div", lambda x: F.kl_div(F.log_softmax(x, -1), F.softmax(x.flip(1), -1), reduction="none")
         + F.kl_div(F.log_softmax(x, -1), F.log_softmax(x.flip(1), -1), reduction="sum", log_target=True), x3),
    ]
    layers = [
        ("prelu", lambda: nn.PReLU(5), x3), ("prelu_one", lambda: nn.PReLU(), x4),
        ("rrelu_eval", lambda: nn.RReLU(), x3),
        ("instance_norm", lambda: nn.InstanceNorm2d(3, affine=True), x4),
        ("instance_norm_plain", lambda: nn.InstanceNorm1d(5), x3),
        ("local_response_norm", lambda: nn.LocalResponseNorm(2), x4),
        ("pixel_shuffle", lambda: nn.PixelShuffle(2), [(1, 8, 3, 3)]),
        ("pixel_unshuffle", lambda: nn.PixelUnshuffle(2), x4),
        ("channel_shuffle", lambda: nn.ChannelShuffle(3), [(1, 6, 3, 3)]),
        ("unfold", lambda: nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2), x4),
        ("fold", lambda: nn.Fold((5, 6), (2, 3), padding=(1, 0), stride=(1, 2)), [(1, 12, 12)]),
        ("lp_pool", lambda: nn.LPPool2d(2, 2), x4),
        ("adaptive_max_uneven", lambda: nn.AdaptiveMaxPool2d((3, 5)), x4),
        ("adaptive_max_1d", lambda: nn.AdaptiveMaxPool1d(4), x3),
        ("conv_transpose3d", lambda: nn.ConvTranspose3d(2, 3, 3, 2, 1), x5),
        ("conv_same", lambda: nn.Conv2d(3, 4, (3, 4), padding="same", dilation=(2, 1)), x4),
        ("embedding_bag", lambda: nn.EmbeddingBag(10, 4, mode="max"), None),
        ("rnn_tanh", lambda: First(nn.RNN(6, 4, 2, batch_first=True, bidirectional=True)), x3),
        ("rnn_relu", lambda: First(nn.RNN(6, 4, nonlinearity="relu")), x3),
        ("lstm_cell", lambda: nn.LSTMCell(6, 4), [(3, 6)]),
        ("gru_cell", lambda: nn.GRUCell(6, 4), [(3, 6)]),
        ("rnn_cell", lambda: nn.RNNCell(6, 4, nonlinearity="relu"), [(3, 6)]),
        ("weight_norm", lambda: nn.utils.weight_norm(nn.Conv1d(5, 4, 3)), x3, ("trace",)),
        ("bilinear", lambda: Pair(nn.Bilinear(6, 4, 3)), x3),
        ("embedding_max_norm", lambda: EmbMaxNorm(), x3),
        ("embedding_max_norm_tied", lambda: Tied(), x3, ("trace",)),
        ("embedding_max_norm_none", lambda: Tied(empty=True), x3, ("trace",)),
        ("list_iadd_alias", lambda: ListAlias(), x3, ("script",)),
        ("list_dict_methods", lambda: ListDict(), x3, ("script",)),
        ("isinstance", lambda: IsInstance(), x3, ("script",)),
        ("weight_norm_all", lambda: nn.utils.weight_norm(nn.Linear(6, 3), dim=None), x3, ("trace",)),
    ]

    class Fn(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def forward(self, x):
            return self.f(x)

    class First(nn.Module):  # a recurrent layer's output (scripted: calls its forward__0)
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    class Pair(nn.Module):  # a two-input layer on two parts of the input
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, x[..., :4])

    class ListDict(nn.Module):  # list and dict methods of scripted code
        def forward(self, x):
            shape: List[int] = list(x.shape)
            shape.reverse()
            shape.insert(0, 1)
            shape.extend([7, 7])
            last = shape.pop()
            shape.remove(7)
            d: Dict[str, int] = {"a": 2, "b": 3}
            k = 0
            for key in d.keys():
                k += d[key]
            for v in d.values():
                k += v
            for kv in d.items():
                k += kv[1]
            return x * float(k + last + shape.index(6) + shape.count(5) + len(shape))

    class EmbMaxNorm(nn.Module):  # rows renormed at each call: tracing must not do it for us
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(10, 4))

        def forward(self, x):
            return F.embedding((x.abs() * 3).long().clamp(0, 9), self.w * 3.0, max_norm=1.5)

    class IsInstance(nn.Module):  # isinstance on Optional values refined at run time
        def forward(self, x, s: Optional[float] = None):
            u: Optional[float] = s
            if x.dim() == 3:
                u = 0.5
            k = 0.0
            if isinstance(u, float):
                k += 1
            if isinstance(s, float):
                k += 10
            v: Optional[List[int]] = None
            if x.size(0) == 2:
                v = [1, 2]
            if isinstance(v, List[int]):
                k += 100
            return x * k

    class Tied(nn.Module):  # only the indexed rows are renormed: the weight is read again
        def __init__(self, empty=False):
            super().__init__()
            self.emb = nn.Embedding(10, 6, max_norm=0.5)
            self.empty = empty  # no index at all: no row renormed

        def forward(self, x):
            i = (x.abs() * 3).long().clamp(0, 2)
            h = self.emb(i[:, :, :0] if self.empty else i)
            return F.linear(h, self.emb.weight) if not self.empty else F.linear(x, self.emb.weight) + h.sum()

    class ListAlias(nn.Module):  # l += m grows l itself: its aliases see it
        def forward(self, x):
            l = [x]
            m = l
            l += [x * 2]
            return torch.cat(m)

    class Bag(nn.Module):  # integer indices made from the float input
        def __init__(self, bag):
            super().__init__()
            self.bag = bag

        def forward(self, x):
            return self.bag((x.abs() * 3).long().clamp(0, 9))

    out = [(n, lambda f=f: Fn(f), s, ("trace",)) for n, f, s in fn]
    for n, make, s, *kinds in layers:  # scripted too unless the entry names its kinds
        kinds = kinds[0] if kinds else ("trace", "script")
        if s is None:
            out.append((n, lambda make=make: Bag(make()), [(3, 4)], kinds))
        else:
            out.append((n, make, s, kinds))
    return out


def test_random(torch, exe, work):
    """rand, randn, rand_like, randn_like, normal_ and uniform_ run (ONNX's generators, not
    torch's stream): shapes as torch's, and the moments of 20000 draws each within 5 standard
    errors of the distribution's."""
    import numpy as np

    class R(torch.nn.Module):
        def forward(self, x):
            return (torch.rand(200, 100), torch.randn(200, 100), torch.rand_like(x), torch.randn_like(x),
                    torch.empty(200, 100).normal_(2.0, 3.0), torch.zeros_like(x).uniform_(-1.0, 3.0))

    path = os.path.join(work, "random.pt")
    x = torch.zeros(200, 100)
    torch.jit.trace(R(), (x,), check_trace=False).save(path)
    xp, od = os.path.join(work, "random.npy"), os.path.join(work, "random_out")
    np.save(xp, x.numpy())
    r = tm.run([exe, "run", path, "-i", xp, "-o", od])
    notes = []
    if r.returncode:
        notes.append((r.stderr.strip().splitlines() or ["?"])[-1][:200])
    else:  # (mean, std) of U(0,1), N(0,1), U(0,1), N(0,1), N(2,3), U(-1,3)
        want = [(0.5, 12 ** -0.5), (0, 1), (0.5, 12 ** -0.5), (0, 1), (2, 3), (1, 4 * 12 ** -0.5)]
        for k, (mu, sd) in enumerate(want):
            v = np.load(os.path.join(od, "output_%d.npy" % k)).astype(np.float64)
            se = sd / np.sqrt(v.size)
            if v.shape != (200, 100):
                notes.append("output_%d: shape %s" % (k, v.shape))
            elif abs(v.mean() - mu) > 5 * se or abs(v.std() - sd) > 5 * sd / np.sqrt(2 * v.size) + 0.01 * sd:
                notes.append("output_%d: mean %.4f std %.4f, want %.4f %.4f" % (k, v.mean(), v.std(), mu, sd))
    status = "FAIL" if notes else "PASS"
    tm.RESULTS.append(("random", "trace", status, None, None, "; ".join(notes)))
    print("%s random trace %s" % (status, "; ".join(notes)))


REFUSED = {  # scripted functions onnxexec must refuse with a message (exit 1), never crash
    "inplace_in_runtime_if": ("""
def f(x):
    y = x.clone()
    if bool(x.sum() > 0):
        y.add_(1.0)
    return y
""", (3,), "in-place write"),
    "repeat_interleave_huge": ("""
def f(x):
    return x.repeat_interleave(4611686018427387904)
""", (4,), "repeat_interleave"),
    "affine_grid_huge": ("""
def f(x):
    return torch.affine_grid_generator(x, [1, 1, 4294967296, 4294967296], False)
""", (1, 2, 3), "affine_grid"),
    "index_put_past_rank": ("""
def f(x):
    y = x.clone()
    torch.index_put_(y, [None, None, None, torch.tensor([0])], torch.tensor(1.))
    return y
""", (2, 3), "index_put"),
    "lstm_no_layers": ("""
def f(x):
    h = torch.zeros(1, 2, 4)
    w: List[torch.Tensor] = []
    r = torch.lstm(x, [h, h], w, True, 0, 0., False, False, False)
    return r[1]
""", (3, 2, 4), "layers"),
    "upsample_short_scales": ("""
def f(x):
    return torch._C._nn.upsample_nearest3d(x, None, [2.0, 2.0])
""", (1, 1, 2, 2, 2), "scales"),
    "upsample_rank1": ("""
def f(x):
    return torch._C._nn.upsample_nearest1d(x, None, [2.0])
""", (3,), "rank"),
}


def test_refused(torch, exe, work):
    """Inputs that once corrupted memory or computed garbage (review 29): each must now fail
    with exit status 1 and a message naming the problem."""
    import numpy as np
    for name, (src, shape, want) in REFUSED.items():
        path = os.path.join(work, name + ".py")
        with open(path, "w") as f:
            f.write("import torch\nfrom typing import List\n" + src)
        import importlib.util
        spec = importlib.util.spec_from_file_location("refused_" + name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        pt, xp = os.path.join(work, name + ".pt"), os.path.join(work, name + ".npy")
        torch.jit.save(torch.jit.script(mod.f), pt)
        np.save(xp, np.ones(shape, np.float32))
        r = tm.run([exe, "run", pt, "-i", xp])
        msg = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        ok = r.returncode == 1 and want in msg
        tm.RESULTS.append((name, "script", "PASS" if ok else "FAIL", None, None,
                           "" if ok else "exit %d: %s" % (r.returncode, msg)))
        print("%s refused %s: exit %d: %s" % ("PASS" if ok else "FAIL", name, r.returncode, msg))


def test_positional(torch, exe, work):
    """`onnxexec run model.pt -i FILE` without a name binds FILE to the first tensor
    parameter of forward, also when more (optional) parameters follow: a scripted
    ConvTranspose2d's forward(input, output_size=None) once refused it ("the shape of input
    'input' is not known")."""
    import numpy as np
    m = torch.jit.script(torch.nn.ConvTranspose2d(2, 3, 3, 2).eval())
    path = os.path.join(work, "positional.pt")
    m.save(path)
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 5)).astype(np.float32)
    xp, od = os.path.join(work, "positional.npy"), os.path.join(work, "positional_out")
    np.save(xp, x)
    with torch.no_grad():
        want = m(torch.from_numpy(x)).numpy()
    r = tm.run([exe, "run", path, "-i", xp, "-o", od])
    if r.returncode:
        status, err, note = "FAIL", None, (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    else:
        err = tm.rel_l2(np.load(os.path.join(od, "output_0.npy")), want)
        status, note = ("PASS", "") if err <= tm.TOL else ("FAIL", "relative L2 %.3g" % err)
    tm.RESULTS.append(("positional_input", "script", status, err, None, note))
    print("%s positional_input script %s" % (status, note))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxexec", required=True)
    p.add_argument("--keep", help="keep the files in this folder")
    p.add_argument("--filter", help="only cases whose name_kind matches this regex")
    args = p.parse_args()
    exe = os.path.abspath(args.onnxexec)
    work = args.keep or tempfile.mkdtemp(prefix="ox-tsops-")
    os.makedirs(work, exist_ok=True)
    rx = re.compile(args.filter) if args.filter else None
    import torch
    torch.set_num_threads(2)
    torch.manual_seed(0)
    try:
        tm.run_items(torch, exe, work, cases(torch), rx, strict=True)
        if not rx:
            test_positional(torch, exe, work)
            test_random(torch, exe, work)
            test_refused(torch, exe, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    fails = [r for r in tm.RESULTS if r[2] != "PASS"]
    print("\n%d passed, %d failed" % (len(tm.RESULTS) - len(fails), len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
