"""Where a network's dropout goes (:mod:`bnn.models.dropout`) and the layers' input masks
(:func:`bnn.models.layers.input_masks`): the masks' layouts against the layers they mask, each network's statement,
and the refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from bnn.models import BayesianCNN, BayesianMLP, DroppedInputs, MultiHeadMLP, WeightSite
from bnn.models.layers import conv, input_masks, linear

GENERATOR = torch.Generator().manual_seed(0)


def site(name: str, *shape: int) -> WeightSite:
    return WeightSite(name, 0, torch.Size(shape), shape[1])


def test_a_channel_mask_covers_a_kernels_input_channel_and_a_flattened_channels_columns():
    kernel, dense = DroppedInputs(site("features.1.weight", 4, 3, 2, 2), 3), DroppedInputs(site("classifier.0.weight", 5, 6), 3)
    mask = torch.tensor([[2.0, 0.0, 3.0]])
    assert kernel.positions == 1 and dense.positions == 2
    assert kernel.input_mask(mask).shape == (1, 3, 1, 1) and kernel.weight_mask(mask).shape == (1, 1, 3, 1, 1)
    torch.testing.assert_close(dense.input_mask(mask), torch.tensor([[2.0, 2.0, 0.0, 0.0, 3.0, 3.0]]))
    torch.testing.assert_close(dense.weight_mask(mask), torch.tensor([[[2.0, 2.0, 0.0, 0.0, 3.0, 3.0]]]))


@pytest.mark.parametrize("spatial", [(7,), (5, 4)])
def test_masking_a_convolutions_input_channels_is_masking_its_kernels_input_channels(spatial):
    """Per example, a convolution of the masked input equals the convolution by the masked kernel (zero padding reads
    zeros either way): the identity that makes one set of masks a draw of the weights."""
    weight = torch.randn(4, 3, *(3,) * len(spatial), generator=GENERATOR, dtype=torch.float64)
    bias = torch.randn(4, generator=GENERATOR, dtype=torch.float64)
    h = torch.randn(5, 3, *spatial, generator=GENERATOR, dtype=torch.float64)
    dropped = DroppedInputs(site("features.1.weight", *weight.shape), 3)
    masks = torch.bernoulli(torch.full((5, 3), 0.5), generator=GENERATOR).double() * 2
    with input_masks({"features.1": dropped.input_mask(masks)}) as called:
        masked = conv(h, weight, bias, name="features.1", padding=1)
        conv(h, weight, bias, name="features.2", padding=1)  # no mask of this name: untouched
    assert called == {"features.1"}
    reference = F.conv1d if len(spatial) == 1 else F.conv2d
    for row in range(5):
        kernel = weight * dropped.weight_mask(masks[row])
        torch.testing.assert_close(masked[row], reference(h[row:row + 1], kernel, bias, padding=1)[0])
    torch.testing.assert_close(conv(h, weight, bias, name="features.1", padding=1),  # outside: no mask
                               reference(h, weight, bias, padding=1))


def test_linear_masks_its_input_only_inside_input_masks():
    h, weight, bias = torch.randn(4, 6, generator=GENERATOR), torch.randn(2, 6, generator=GENERATOR), torch.zeros(2)
    mask = torch.tensor([0.0, 2.0]).repeat_interleave(3).expand(4, 6)
    with input_masks({"classifier.0": mask}):
        torch.testing.assert_close(linear(h, weight, bias, name="classifier.0"), (h * mask) @ weight.T)
    torch.testing.assert_close(linear(h, weight, bias, name="classifier.0"), h @ weight.T)


def test_the_mlp_drops_every_layers_inputs_and_the_cnn_channels_after_each_block_then_its_head():
    mlp = BayesianMLP(3, 1, hidden=(5, 4))
    assert [(d.weight.name, d.units, d.positions) for d in mlp.dropped_inputs()] == [
        ("layers.0.weight", 3, 1), ("layers.1.weight", 5, 1), ("layers.2.weight", 4, 1)]
    cnn = BayesianCNN(64, 10, input_shape=(8, 8), channels=(8, 16), hidden=(32,), likelihood="categorical")
    # block 0 reads the image (not dropped); block 1 reads block 0's 8 channels; the head's first layer reads block 1's
    # 16 channels of 2 x 2 pooled positions each; its second layer reads 32 hidden units
    assert [(d.weight.name, d.units, d.positions) for d in cnn.dropped_inputs()] == [
        ("features.1.weight", 8, 1), ("classifier.0.weight", 16, 4), ("classifier.1.weight", 32, 1)]
    assert [d.weight.name for d in BayesianCNN(12, 1, channels=(2,), hidden=()).dropped_inputs()] == ["classifier.0.weight"]
    assert MultiHeadMLP(3, 1, num_heads=2).dropped_inputs() is None  # not a chain of dense layers: it says nothing


@pytest.mark.parametrize("weight, units, message", [
    (site("layers.0.weight", 4, 6), 4, r"needs units that divide its 6 inputs .* got 4"),
    (site("layers.0.weight", 4, 6), 0, r"needs units that divide its 6 inputs .* got 0"),
    (WeightSite("layers.0.bias", 0, torch.Size((4,)), 6), 4, r"needs a weight of two or more dimensions"),
])
def test_a_dropout_that_does_not_fit_its_layer_is_refused(weight, units, message):
    with pytest.raises(ValueError, match=message):
        DroppedInputs(weight, units)


def test_a_mask_of_the_wrong_number_of_units_is_refused():
    with pytest.raises(ValueError, match=r"a dropout mask of 'classifier.0' must end in its 3 units, got shape \(2, 4\)"):
        DroppedInputs(site("classifier.0.weight", 5, 6), 3).input_mask(torch.ones(2, 4))
