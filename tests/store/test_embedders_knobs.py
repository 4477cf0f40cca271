"""No embedder carries a fusion knob that nothing reads.

`HashingEmbedder.text_weight_scale` (the full-text half counted 4 x with this embedder) was
read by the rank fusion of issue 8; since the calibrated relevance of issue 17 each side's
weight is fitted per embedder (`anchorfs.store.ranking.CALIBRATIONS`) and the attribute was read
by nothing, while the docs still said it set the fusion.
"""

from __future__ import annotations

from anchorfs.store.embedders import HashingEmbedder
from anchorfs.store.ranking import CALIBRATIONS, calibrated_relevance, calibration


def test_the_hashing_embedder_has_no_text_weight_scale() -> None:
    assert not hasattr(HashingEmbedder, "text_weight_scale")
    assert not hasattr(HashingEmbedder(), "text_weight_scale")


def test_the_full_text_side_weighs_by_the_configured_weight_over_the_fitted_one() -> None:
    cal = calibration("hashing")
    assert cal is CALIBRATIONS["hashing"]
    features = (0.1, 1.0, 0.5, 0.0, 0.0)
    at_default = calibrated_relevance(features, cal, vector_weight=cal.vector_weight, text_weight=cal.text_weight)
    doubled = calibrated_relevance(features, cal, vector_weight=cal.vector_weight, text_weight=2 * cal.text_weight)
    assert doubled > at_default  # the configured weight is what scales the text evidence
    # an embedder without a fit of its own reads the hashing one
    assert calibration("no-such-embedder") is cal
