from __future__ import annotations

import pytest

from forgeml.rag.fusion import RRF_K, convex_combination, reciprocal_rank_fusion


def test_rrf_adds_reciprocal_ranks_with_k_60() -> None:
    fused = reciprocal_rank_fusion([[(1, 0.9), (2, 0.5)], [(2, 7.0), (3, 1.0)]])
    assert RRF_K == 60
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3] == pytest.approx(1 / 62)


def test_convex_combination_normalises_each_ranking() -> None:
    dense = [(1, 0.9), (2, 0.5), (3, 0.1)]
    bm25 = [(3, 12.0), (4, 2.0)]
    fused = convex_combination(dense, bm25, 0.25)
    assert fused[1] == pytest.approx(0.25)
    assert fused[2] == pytest.approx(0.25 * 0.5)
    assert fused[3] == pytest.approx(0.75)
    assert fused[4] == pytest.approx(0.0)


def test_weight_one_is_dense_alone_and_zero_is_bm25_alone() -> None:
    dense, bm25 = [(1, 0.9), (2, 0.1)], [(2, 5.0), (1, 1.0)]
    assert max((s, r) for r, s in convex_combination(dense, bm25, 1.0).items())[1] == 1
    assert max((s, r) for r, s in convex_combination(dense, bm25, 0.0).items())[1] == 2
