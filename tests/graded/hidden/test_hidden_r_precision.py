"""Graded, hidden: R-Precision with ties broken by label order, and every label gold."""

from __future__ import annotations

import numpy as np
import pytest
from graded_helpers import check_value

from minbert.metrics import r_precision

pytestmark = [pytest.mark.component("r_precision"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("r_precision")]


@pytest.mark.points(1)
def test_ties_and_all_gold():
    check_value(r_precision(np.array([0.5, 0.5, 0.5, 0.1]), np.array([1, 1, 0, 0])), 1.0,
                "R-Precision with three labels tied at the top (the first two are gold)")
    check_value(r_precision(np.array([0.3, 0.2, 0.9]), np.array([1, 1, 1])), 1.0,
                "R-Precision when every label is gold")
