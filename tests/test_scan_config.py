"""Configuration files: discovery walking up, precedence, every key, and errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdoctor.errors import UserError
from llmdoctor.scan.config import find_config, load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_nearest_config_walking_up(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.llmdoctor]\nignore = ['LLM002']\n")
    write(tmp_path / "sub" / "pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.llmdoctor]: skipped
    (tmp_path / "sub" / "deeper").mkdir()
    assert find_config(tmp_path / "sub" / "deeper") == tmp_path / "pyproject.toml"
    write(tmp_path / "sub" / ".llmdoctor.yaml", "ignore: [LLM004]\n")
    assert find_config(tmp_path / "sub" / "deeper" / "file.py") == tmp_path / "sub" / ".llmdoctor.yaml"


def test_every_key(tmp_path):
    write(tmp_path / "rules-extra" / "x.yaml", "kind: tables\n")
    config = load_config(write(tmp_path / "pyproject.toml", """\
[tool.llmdoctor]
select = ["LLM"]
ignore = ["llm002"]
exclude = ["migrations"]
per-file-ignores = { "tests/*" = ["LLM004"], "scripts/*" = "LLM002" }
rules_dir = ["rules-extra"]
severity = { LLM004 = "error" }
max-file-size = 1000
respect-gitignore = false
control-plane = ["app/admin/*", "app/api.py::Settings.*"]
python-platform = "win32"
"""))
    assert config.select == ("LLM",) and config.ignore == ("LLM002",)
    assert config.exclude == ("migrations",)
    assert config.per_file_ignores == (("tests/*", ("LLM004",)), ("scripts/*", ("LLM002",)))
    assert config.rules_dirs == (str(tmp_path / "rules-extra"),)
    assert config.severity == (("LLM004", "error"),)
    assert config.max_file_size == 1000 and config.respect_gitignore is False
    assert config.control_plane == (("app/admin/*", ""), ("app/api.py", "Settings.*"))
    assert config.declared_control_plane(str(tmp_path / "app" / "admin" / "users.py"), "create_user")
    assert config.declared_control_plane(str(tmp_path / "app" / "api.py"), "Settings.update")
    assert not config.declared_control_plane(str(tmp_path / "app" / "api.py"), "chat")
    assert config.python_platform == "win32"
    assert config.root == str(tmp_path) and config.source == str(tmp_path / "pyproject.toml")


def test_empty_yaml_is_defaults(tmp_path):
    config = load_config(write(tmp_path / ".llmdoctor.yaml", ""))
    assert config.select == () and config.root == str(tmp_path) and config.python_platform == "linux"


@pytest.mark.parametrize(("text", "needle"), [
    ("select: [LLM-4]\n", "key 'select'"),
    ("per-file-ignores: [a]\n", "key 'per-file-ignores'"),
    ("per-file-ignores: {'tests/*': [1]}\n", "key 'per-file-ignores'"),
    ("severity: [LLM004]\n", "key 'severity'"),
    ("respect-gitignore: maybe\n", "key 'respect-gitignore'"),
    ("max-file-size: true\n", "key 'max-file-size'"),
    ("rules-dir: [nowhere]\n", "key 'rules-dir'"),
    ("colour: red\n", "key 'colour': unknown setting"),
    ("control-plane: {admin: yes}\n", "key 'control-plane': must be a list of strings"),
    ("control-plane: ['::reset']\n", "key 'control-plane': '::reset': expected a file glob"),
    ("control-plane: ['app/api.py::']\n", "key 'control-plane': 'app/api.py::': expected a file glob"),
    ("python-platform: windows\n", "key 'python-platform': must be one of linux, darwin, win32, all"),
    ("python-platform: [linux]\n", "key 'python-platform': must be one of"),
])
def test_invalid_values_name_file_and_key(tmp_path, text, needle):
    path = write(tmp_path / ".llmdoctor.yaml", text)
    with pytest.raises(UserError) as err:
        load_config(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_tool_llmdoctor_must_be_a_table(tmp_path):
    path = write(tmp_path / "pyproject.toml", "[tool]\nllmdoctor = 3\n")
    with pytest.raises(UserError, match="tool.llmdoctor"):
        load_config(path)
