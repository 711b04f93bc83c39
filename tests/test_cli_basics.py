from llmdoctor import __version__


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"llmdoctor {__version__}"


def test_help_lists_commands(cli):
    result = cli("--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout


def test_unknown_command_exits_2_without_traceback(cli):
    result = cli("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
