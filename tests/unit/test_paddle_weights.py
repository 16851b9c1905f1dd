"""--model pointed at a -Paddle repo's files: one line saying to use baidu/ERNIE-4.5-0.3B-PT."""
import json
import struct

import pytest

from app.errors import ModelNotFoundError
from app.model_source import resolve_model
from app.settings import ModelSettings

ONE_LINE = ("holds PaddlePaddle weights (a -Paddle repo); vLLM needs the PyTorch ones: "
            "use --model baidu/ERNIE-4.5-0.3B-PT")


def write_safetensors(path, names):
    header = json.dumps({name: {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]} for name in names}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0")


def model_dir(tmp_path, name="model", weights=("model.embed_tokens.weight",), extra=()):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    write_safetensors(folder / "model.safetensors", weights)
    for file in extra:
        (folder / file).write_bytes(b"")
    return folder


@pytest.mark.parametrize("model", ["baidu/ERNIE-4.5-0.3B-Paddle", "baidu/ERNIE-4.5-0.3B-Base-Paddle"])
def test_hub_id_of_a_paddle_repo_is_refused_before_any_download(model):
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model(ModelSettings(model=model))
    assert str(info.value) == f"--model {model} {ONE_LINE}"


@pytest.mark.parametrize("kind", ["folder name", "paddle parameter names", "pdparams file"])
def test_local_paddle_files_are_refused(tmp_path, kind):
    folder = {"folder name": lambda: model_dir(tmp_path, "ERNIE-4.5-0.3B-Paddle"),
              "paddle parameter names": lambda: model_dir(tmp_path, weights=["ernie.embed_tokens.weight"]),
              "pdparams file": lambda: model_dir(tmp_path, extra=["model_state.pdparams"])}[kind]()
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model(ModelSettings(model=str(folder)))
    assert ONE_LINE in str(info.value) and "\n" not in str(info.value)


def test_pytorch_files_pass(tmp_path):
    folder = model_dir(tmp_path, "ERNIE-4.5-0.3B-PT", weights=["model.embed_tokens.weight", "lm_head.weight"])
    assert resolve_model(ModelSettings(model=str(folder))) == str(folder.resolve())
