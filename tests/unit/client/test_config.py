"""Where the client finds its server and token: argument, environment, config file, default."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.client import DEFAULT_SERVER, ClientError, config_path, resolve_endpoint


def test_arguments_beat_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server: http://file:1\ntoken: from-file\n")
    env = {"PHALANX_CONFIG": str(config)}
    assert resolve_endpoint(environ=env).server == "http://file:1"
    assert resolve_endpoint(environ=env).token == "from-file"

    env |= {"PHALANX_SERVER": "http://env:2/", "PHALANX_TOKEN": "from-env"}
    endpoint = resolve_endpoint(environ=env)
    assert (endpoint.server, endpoint.token) == ("http://env:2", "from-env")
    assert endpoint.server_from == "PHALANX_SERVER"

    endpoint = resolve_endpoint("http://arg:3", "from-arg", environ=env)
    assert (endpoint.server, endpoint.token, endpoint.server_from) == (
        "http://arg:3",
        "from-arg",
        "--server",
    )


def test_without_anything_the_default_server_and_no_token(tmp_path: Path) -> None:
    endpoint = resolve_endpoint(environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert (endpoint.server, endpoint.token) == (DEFAULT_SERVER, None)


def test_the_file_fills_what_the_environment_leaves_out(tmp_path: Path) -> None:
    (tmp_path / "phalanx").mkdir()
    (tmp_path / "phalanx" / "config.yaml").write_text("token: from-file\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PHALANX_SERVER": "http://env:2"}
    endpoint = resolve_endpoint(environ=env)
    assert (endpoint.server, endpoint.token) == ("http://env:2", "from-file")


def test_config_path_honours_phalanx_config_then_xdg_then_home(tmp_path: Path) -> None:
    assert config_path({"PHALANX_CONFIG": "/x/y.yaml"}) == Path("/x/y.yaml")
    assert config_path({"XDG_CONFIG_HOME": "/xdg"}) == Path("/xdg/phalanx/config.yaml")
    assert config_path({}) == Path.home() / ".config" / "phalanx" / "config.yaml"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: [1,\n", "line 2"),
        ("- a\n- b\n", "holds a list, not a mapping"),
        ("sever: http://x\n", "unknown key 'sever'; field: sever; fix: use only: server, token"),
        ("token: 12\n", "token must be text"),
    ],
)
def test_a_bad_config_file_is_named_with_the_fix(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(ClientError) as error:
        resolve_endpoint(environ={"PHALANX_CONFIG": str(config)})
    assert str(config) in str(error.value) and expected in str(error.value)
    assert "fix: " in str(error.value)


def test_a_missing_named_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ClientError) as error:
        resolve_endpoint(environ={"PHALANX_CONFIG": str(tmp_path / "none.yaml")})
    assert error.value.field == "PHALANX_CONFIG" and "does not exist" in str(error.value)
