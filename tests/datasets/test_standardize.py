import torch
from bnn.datasets import Standardizer


def test_standardised_training_columns_have_zero_mean_unit_sd():
    values = torch.randn(50, 3, dtype=torch.float64) * torch.tensor([1.0, 10.0, 0.1], dtype=torch.float64) + 5
    z = Standardizer.fit(values).transform(values)
    torch.testing.assert_close(z.mean(0), torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(z.std(0, unbiased=False), torch.ones(3, dtype=torch.float64))


def test_constant_column_becomes_zero_without_dividing_by_zero():
    values = torch.tensor([[1.0, 7.0], [2.0, 7.0], [3.0, 7.0]])
    scaler = Standardizer.fit(values)
    assert scaler.std[1] == 1.0
    z = scaler.transform(values)
    assert torch.isfinite(z).all() and torch.all(z[:, 1] == 0)
    torch.testing.assert_close(scaler.inverse(z), values)
