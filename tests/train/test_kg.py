from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
import torch

from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError, NotFoundError
from forgeml.train.models.kg import (
    FitSettings,
    KGEmbedding,
    KnownTriples,
    NegativeBatch,
    NegativeSamplingParams,
    Predict,
    RotatE,
    TransE,
    TripleVocab,
    adversarial_weights,
    build_rotate,
    build_transe,
    corrupt,
    evaluate_ranking,
    filtered_ranks,
    fit_kg,
    negative_batches,
    negative_sampling_loss,
    rank_tails,
    ranking_metrics,
    read_triples,
    score_triple,
    score_triples,
    self_adversarial_loss,
    triple_ids,
    triples_task,
)
from forgeml.train.task import SplitData, TaskData

TRAIN = pl.DataFrame(
    {
        "head": ["dog", "cat", "dog", "puppy"],
        "relation": ["is_a", "is_a", "has_part", "is_a"],
        "tail": ["animal", "animal", "tail", "dog"],
    }
)
VALID = pl.DataFrame({"head": ["cat"], "relation": ["has_part"], "tail": ["tail"]})


def _task() -> TaskData:
    return triples_task(TRAIN, VALID)


def _set(table: torch.nn.Embedding, rows: list[list[float]]) -> None:
    with torch.no_grad():
        table.weight.copy_(torch.tensor(rows))


# --- data -> tensors ---------------------------------------------------------------------


def test_a_graph_becomes_tail_prediction_over_every_entity() -> None:
    task = _task()

    assert task.class_names == ["animal", "cat", "dog", "puppy", "tail"]
    assert task.meta["relations"] == ["has_part", "is_a"]
    assert task.num_classes == 5
    assert task.train.inputs["head"].tolist() == [2, 1, 2, 3]
    assert task.train.inputs["relation"].tolist() == [1, 1, 0, 1]
    assert task.train.targets.tolist() == [0, 0, 4, 2]
    assert task.eval is not None
    assert triple_ids(task.eval).tolist() == [[1, 0, 4]]
    assert task.test is None


def test_the_vocabulary_round_trips_names_and_rejects_unknown_ones() -> None:
    vocab = TripleVocab.from_task(_task())

    assert vocab.encode([("puppy", "is_a", "dog")]).tolist() == [[3, 1, 2]]
    with pytest.raises(NotFoundError, match="Entity 'wolf' is not one of the graph's 5"):
        vocab.encode([("wolf", "is_a", "dog")])
    with pytest.raises(NotFoundError, match="Relation 'eats' is not one of the graph's: has_part"):
        vocab.relation_id("eats")


@pytest.mark.parametrize(
    ("frame", "error", "message"),
    [
        (TRAIN.drop("relation"), MissingColumnError, "has no column relation"),
        (
            TRAIN.with_columns(pl.lit(None, pl.String).alias("tail")),
            InvalidDataError,
            "empty cells in column tail",
        ),
        (TRAIN.clear(), InvalidDataError, "train triples are empty"),
    ],
)
def test_a_bad_train_frame_is_refused(
    frame: pl.DataFrame, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        triples_task(frame)


def test_triple_files_are_read_as_text_from_csv_and_parquet(tmp_path: Path) -> None:
    frame = pl.DataFrame({"head": ["1.n.01"], "relation": ["_hypernym"], "tail": ["2.n.01"]})
    frame.write_csv(tmp_path / "t.csv")
    frame.write_parquet(tmp_path / "t.parquet")

    for name in ("t.csv", "t.parquet"):
        assert read_triples(tmp_path / name).rows() == [("1.n.01", "_hypernym", "2.n.01")]
    with pytest.raises(InvalidDataError, match=r"give a \.csv or \.parquet file"):
        read_triples(tmp_path / "t.tsv")


# --- the models --------------------------------------------------------------------------


def test_a_head_rotated_onto_its_tail_is_at_distance_zero() -> None:
    model = RotatE(num_entities=3, num_relations=1, dim=2, gamma=6.0)
    theta = (math.pi / 2, math.pi / 3)  # rotations by 90 and 60 degrees
    head = (1 + 2j, -0.5 + 1j)
    tail = [h * complex(math.cos(t), math.sin(t)) for h, t in zip(head, theta, strict=True)]
    far = [5.0, 5.0, 5.0, 5.0]
    entity = lambda zs: [z.real for z in zs] + [z.imag for z in zs]  # noqa: E731
    _set(model.entity, [entity(head), entity(tail), far])
    _set(model.relation, [[t / math.pi * model.embedding_range for t in theta]])
    h, r, t = (torch.tensor([i]) for i in (0, 0, 1))

    with torch.no_grad():
        true, false = model.score(h, r, t), model.score(h, r, torch.tensor([2]))
        head_query = model.query(t, r, "head")

    assert float(true) == pytest.approx(6.0, abs=1e-5)
    # predicting the head undoes the rotation: t ∘ r̄ is the head
    assert head_query.tolist()[0] == pytest.approx(entity(head), abs=1e-6)
    # the third entity: |h ∘ r − far| summed over both complex dimensions
    expected = sum(abs(z - complex(5, 5)) for z in tail)
    assert float(false) == pytest.approx(6.0 - expected, rel=1e-5)


def test_the_gradient_at_distance_zero_is_zero_not_nan() -> None:
    model = RotatE(num_entities=2, num_relations=1, dim=3, gamma=6.0)
    _set(model.relation, [[0.0, 0.0, 0.0]])  # the identity rotation
    _set(model.entity, [[0.5] * 6, [0.5] * 6])  # so h ∘ r equals t exactly

    model.score(torch.tensor([0]), torch.tensor([0]), torch.tensor([1])).sum().backward()

    assert model.entity.weight.grad is not None
    assert torch.equal(model.entity.weight.grad, torch.zeros(2, 6))


def test_a_head_translated_onto_its_tail_is_at_distance_zero() -> None:
    model = TransE(num_entities=2, num_relations=1, dim=2, gamma=3.0)
    _set(model.entity, [[1.0, 2.0], [1.5, 1.0]])
    _set(model.relation, [[0.5, -1.0]])
    h, r, t = (torch.tensor([i]) for i in (0, 0, 1))

    with torch.no_grad():
        assert float(model.score(h, r, t)) == pytest.approx(3.0)
        assert float(model.score(t, r, h)) == pytest.approx(3.0 - (1.0 + 2.0))  # ||t + r − h||₁
        assert model.query(t, r, "head").tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize("model_class", [RotatE, TransE])
def test_scoring_every_entity_fast_equals_the_exported_forward(
    model_class: type[RotatE | TransE],
) -> None:
    torch.manual_seed(0)
    # 3,000 entities of 2x96 floats: several blocks, the last one partial
    model = model_class(num_entities=3000, num_relations=4, dim=96, gamma=6.0)
    head, relation = torch.tensor([0, 5, 2999]), torch.tensor([0, 3, 1])

    with torch.inference_mode():
        fast = model.score_all(head, relation, "tail")
        exported = model(head, relation)
        triples = model.score(
            head.repeat_interleave(3000),
            relation.repeat_interleave(3000),
            torch.arange(3000).repeat(3),
        )

    assert fast.shape == (3, 3000)
    assert torch.allclose(fast, exported, atol=1e-4)
    assert torch.allclose(fast.flatten(), triples, atol=1e-4)


def test_the_builders_size_the_tables_from_the_graph() -> None:
    task = _task()

    rotate = build_rotate(task, dim=8, gamma=9.0)
    transe = build_transe(task, dim=8)

    assert rotate.entity.weight.shape == (5, 16)  # real parts, then imaginary parts
    assert rotate.relation.weight.shape == (2, 8)  # one phase per complex dimension
    assert transe.entity.weight.shape == (5, 8)
    assert rotate.gamma == 9.0
    assert transe.gamma == 6.0
    bound = (9.0 + 2.0) / 8
    assert float(rotate.entity.weight.detach().abs().max()) <= bound


def test_a_builder_refuses_a_task_that_is_not_a_graph_and_unknown_params() -> None:
    rows = SplitData(inputs={"features": torch.zeros(2, 3)}, targets=torch.zeros(2))
    tabular = TaskData(task="classification", train=rows, num_classes=2, input_shape=(3,))

    with pytest.raises(ConfigError, match="Model 'rotate' needs a knowledge-graph task"):
        build_rotate(tabular)
    with pytest.raises(ConfigError, match=r"model\.params: unknown key 'width'"):
        build_transe(_task(), width=3)
    with pytest.raises(ConfigError, match=r"model\.params: key 'gamma'"):
        build_rotate(_task(), gamma=0)


# --- negative sampling and the loss ------------------------------------------------------


def test_negatives_are_uniform_entity_ids_drawn_from_the_generator() -> None:
    positives = torch.tensor([[0, 0, 1], [2, 1, 3]])

    first = corrupt(positives, 10, 50, "head", torch.Generator().manual_seed(3))
    again = corrupt(positives, 10, 50, "head", torch.Generator().manual_seed(3))

    assert first.negatives.shape == (2, 50)
    assert torch.equal(first.negatives, again.negatives)
    assert int(first.negatives.min()) >= 0
    assert int(first.negatives.max()) < 10
    assert len(set(first.negatives.flatten().tolist())) == 10  # every entity can be drawn


def test_batches_alternate_tail_and_head_corruption_over_shuffled_epochs() -> None:
    triples = torch.arange(30).reshape(10, 3)

    batches = negative_batches(triples, 40, 4, 2, torch.Generator().manual_seed(0))
    first_epoch = [next(batches) for _ in range(3)]  # 4 + 4 + 2 triples
    second = next(batches)

    assert [b.corrupt for b in first_epoch] == ["tail", "head", "tail"]
    assert [len(b.positives) for b in first_epoch] == [4, 4, 2]
    seen = torch.cat([b.positives for b in first_epoch])
    assert sorted(seen[:, 0].tolist()) == list(range(0, 30, 3))  # each triple once
    assert second.corrupt == "head"


def test_the_adversarial_weights_are_a_detached_softmax_over_the_negatives() -> None:
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], requires_grad=True)

    weights = adversarial_weights(scores, alpha=0.5)

    assert not weights.requires_grad
    assert torch.allclose(weights, torch.softmax(0.5 * scores.detach(), dim=1))
    assert weights[1].tolist() == pytest.approx([1 / 3] * 3)
    assert adversarial_weights(scores, alpha=0.0)[0].tolist() == pytest.approx([1 / 3] * 3)


def test_the_loss_is_the_papers_and_its_weights_take_no_gradient() -> None:
    positive = torch.tensor([2.0, -1.0], requires_grad=True)
    negative = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]], requires_grad=True)

    loss = self_adversarial_loss(positive, negative, alpha=1.0)
    loss.backward()

    p = torch.softmax(negative.detach(), dim=1)
    log_sigmoid = torch.nn.functional.logsigmoid
    expected = (
        -(
            log_sigmoid(positive.detach()).mean()
            + (p * log_sigmoid(-negative.detach())).sum(1).mean()
        )
        / 2
    )
    assert float(loss.detach()) == pytest.approx(float(expected))
    # with p constant, d/ds_i of −p_i log σ(−s_i) / 2B is p_i σ(s_i) / 2B
    assert negative.grad is not None
    assert torch.allclose(negative.grad, p * torch.sigmoid(negative.detach()) / 4)


def test_the_batch_loss_scores_the_true_side_against_the_corrupted_one() -> None:
    torch.manual_seed(0)
    model = RotatE(num_entities=6, num_relations=2, dim=4, gamma=6.0)
    positives = torch.tensor([[0, 1, 2], [3, 0, 4]])
    negatives = torch.tensor([[5, 1], [2, 0]])

    sides: tuple[Predict, Predict] = ("tail", "head")
    for side in sides:
        loss = negative_sampling_loss(model, NegativeBatch(positives, negatives, side), 0.5)
        h, r, t = positives.unbind(1)
        if side == "tail":
            corrupted = model.score(
                h.repeat_interleave(2), r.repeat_interleave(2), negatives.flatten()
            )
        else:
            corrupted = model.score(
                negatives.flatten(), r.repeat_interleave(2), t.repeat_interleave(2)
            )
        expected = self_adversarial_loss(model.score(h, r, t), corrupted.reshape(2, 2), 0.5)
        assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)


def _chain_graph(entities: int) -> torch.Tensor:
    """i -next-> i+1 and i -prev-> i-1 over a line of entities."""
    forward = [[i, 0, i + 1] for i in range(entities - 1)]
    backward = [[i + 1, 1, i] for i in range(entities - 1)]
    return torch.tensor(forward + backward)


def test_fitting_lowers_the_loss_and_a_seed_repeats_it() -> None:
    triples = _chain_graph(40)
    sampling = NegativeSamplingParams(negatives=8)
    runs = []
    for steps in (40, 5):
        torch.manual_seed(0)
        model = TransE(num_entities=40, num_relations=2, dim=8, gamma=2.0)
        # no learning-rate drop, so the 5-step run is the start of the 40-step one
        settings = FitSettings(steps, 32, 0.02, sampling, lr_drop_at=1.0)
        runs.append(fit_kg(model, triples, settings, torch.Generator().manual_seed(1)))

    assert len(runs[0]) == 40
    assert runs[1] == runs[0][:5]
    assert sum(runs[0][-10:]) / 10 < 0.7 * sum(runs[0][:10]) / 10


# --- filtered ranking ----------------------------------------------------------------------


def _line_model() -> TransE:
    """TransE in one dimension: entity e at position POSITIONS[e], relation 0 the zero shift.

    The score of a candidate is γ minus its distance to the query, so ranks can be read
    off the number line.
    """
    model = TransE(num_entities=6, num_relations=1, dim=1, gamma=10.0)
    _set(model.entity, [[p] for p in POSITIONS])
    _set(model.relation, [[0.0]])
    return model


POSITIONS = [0.0, 1.0, 2.0, 3.0, 4.0, 2.0]  # entity 5 ties with entity 2


def test_known_answers_are_found_for_each_query() -> None:
    known = KnownTriples([torch.tensor([[0, 0, 1], [0, 0, 2], [3, 0, 2]])], num_relations=1)

    rows, tails = known.answers(torch.tensor([0, 4, 3]), torch.tensor([0, 0, 0]), "tail")
    heads_rows, heads = known.answers(torch.tensor([2]), torch.tensor([0]), "head")

    assert list(zip(rows.tolist(), tails.tolist(), strict=True)) == [(0, 1), (0, 2), (2, 2)]
    assert heads_rows.tolist() == [0, 0]
    assert sorted(heads.tolist()) == [0, 3]


def test_filtered_ranks_drop_other_true_answers_and_count_ties_half() -> None:
    model = _line_model()
    test = torch.tensor([[0, 0, 2]])
    # tail side from entity 0: distances e0 0, e1 1, e2 2, e5 2 (tie), e3 3, e4 4
    raw = KnownTriples([test], num_relations=1)
    filtered = KnownTriples([test, torch.tensor([[0, 0, 1], [4, 0, 2]])], num_relations=1)

    assert filtered_ranks(model, test, raw, "tail").tolist() == [3.5]  # e0, e1 above; e5 tied
    assert filtered_ranks(model, test, filtered, "tail").tolist() == [2.5]  # e1 is true too
    # head side from entity 2: distances e2 0, e5 0, e1 1, e3 1, e0 2 (truth), e4 2 (tie)
    assert filtered_ranks(model, test, raw, "head").tolist() == [5.5]
    assert filtered_ranks(model, test, filtered, "head").tolist() == [5.0]  # e4 is a true head


def test_ranking_metrics_summarise_ranks() -> None:
    metrics = ranking_metrics(torch.tensor([1.0, 2.0, 4.0, 20.0]))

    assert metrics.mrr == pytest.approx((1 + 0.5 + 0.25 + 0.05) / 4)
    assert metrics.mr == pytest.approx(27 / 4)
    assert (metrics.hits_at_1, metrics.hits_at_3, metrics.hits_at_10) == (0.25, 0.5, 0.75)
    assert metrics.count == 4
    with pytest.raises(InvalidDataError, match="no ranks"):
        ranking_metrics(torch.empty(0))


def test_evaluation_ranks_both_sides_and_restores_the_mode() -> None:
    model = _line_model()
    test = torch.tensor([[0, 0, 2]])
    model.train()

    metrics = evaluate_ranking(model, test, KnownTriples([test], num_relations=1))

    assert metrics.count == 2
    assert metrics.mr == pytest.approx((3.5 + 5.5) / 2)
    assert model.training


# --- serving -------------------------------------------------------------------------------


def test_serving_scores_named_triples_and_ranks_named_tails() -> None:
    task = _task()
    vocab = TripleVocab.from_task(task)
    torch.manual_seed(0)
    model: KGEmbedding = build_rotate(task, dim=4)

    score = score_triple(model, vocab, "dog", "is_a", "animal")
    ranked = rank_tails(model, vocab, "dog", "is_a", k=3)
    every = rank_tails(model, vocab, "dog", "is_a", k=50)

    ids = vocab.encode([("dog", "is_a", "animal")])
    with torch.no_grad():
        direct = float(model.score(ids[:, 0], ids[:, 1], ids[:, 2]))
        all_scores = model(ids[:, 0], ids[:, 1])[0]
    assert score == pytest.approx(direct)
    assert score_triples(model, vocab, [("dog", "is_a", "animal")] * 2) == [score, score]
    assert [s for _, s in ranked] == pytest.approx(sorted(all_scores.tolist(), reverse=True)[:3])
    assert dict(every)["animal"] == pytest.approx(score)
    assert len(every) == 5


def test_serving_refuses_unknown_names_and_an_empty_top_k() -> None:
    task = _task()
    vocab = TripleVocab.from_task(task)
    model = build_transe(task, dim=4)

    with pytest.raises(NotFoundError, match="Entity 'wolf'"):
        rank_tails(model, vocab, "wolf", "is_a")
    with pytest.raises(NotFoundError, match="Relation 'eats'"):
        score_triple(model, vocab, "dog", "eats", "tail")
    with pytest.raises(InvalidDataError, match="at least 1 tail"):
        rank_tails(model, vocab, "dog", "is_a", k=0)
