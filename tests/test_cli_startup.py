"""The CLI loads only what the command it runs needs (start-up time is measured in docs/performance.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pykueue

HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "aiohttp",
    "httpx",
    "cryptography",
    "prometheus_client",
    "pykueue.standalone",
    "pykueue.kube",
    "pykueue.views",
    "pykueue.multikueue",
    "pykueue.reconcilers",
    "pykueue.engine",
    "pykueue.store",
    "pykueue.sim",
    "pykueue.api.manifests",
)


def _loaded_for(*argv: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from pykueue.cli.main import build_app\n"
        f"build_app({list(argv)!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {{h.split('.')[0] for h in {HEAVY!r}}})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out)
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "argv",
    [
        ("version",),
        ("--version",),
        ("get", "jobs"),
        ("describe", "workload", "x"),
        ("submit", "--queue", "main", "--", "true"),
        ("logs", "x"),
        ("token", "list"),
        ("policy", "history"),
        ("report", "usage"),
    ],
)
def test_client_commands_do_not_load_the_server_stack(argv: tuple[str, ...]) -> None:
    assert _loaded_for(*argv) == []


def test_a_server_command_loads_what_it_needs() -> None:
    assert "pykueue.kube.deploy" in _loaded_for("manifests")


def _loaded_by_main(*argv: str) -> tuple[str, set[str]]:
    """The top-level packages loaded by running ``pykueue ARGV`` through ``main()`` in a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['pykueue', *{list(argv)!r}]\n"
        "from pykueue.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: set[str] = set(json.loads(result.stderr.strip().splitlines()[-1]))
    return result.stdout, loaded


@pytest.mark.parametrize("argv", [("version",), ("--version",)])
def test_the_version_is_printed_without_loading_typer(argv: tuple[str, ...]) -> None:
    out, loaded = _loaded_by_main(*argv)
    assert out == f"{pykueue.__version__}\n"
    assert "typer" not in loaded
    assert "pydantic" not in loaded


@pytest.mark.parametrize(
    "argv",
    [
        ("get", "jobs"),
        ("describe", "workload", "x"),
        ("logs", "x"),
        ("get", "--help"),
        ("policy", "history"),
        ("policy", "show", "3"),
        ("policy", "rollback", "3"),
    ],
)
def test_read_only_commands_load_neither_typer_nor_yaml(argv: tuple[str, ...]) -> None:
    # No server answers at this address; what the command imports on its way is the point here.
    _, loaded = _loaded_by_main(*argv, "--server", "http://127.0.0.1:9", "--token", "x")
    assert not loaded & {"typer", "click", "pydantic", "yaml", "rich"}, loaded


def test_a_read_only_command_fails_cleanly_and_its_usage_is_checked() -> None:
    code = "import sys\nsys.argv = ['pykueue', *sys.argv[1:]]\nfrom pykueue.cli.main import main\nmain()\n"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)

    unreachable = run("get", "jobs", "--server", "http://127.0.0.1:9", "--token", "x")
    assert unreachable.returncode == 1 and unreachable.stderr.startswith("error: "), unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    wrong = run("get", "pods", "--server", "http://127.0.0.1:9")
    assert wrong.returncode == 1 and "choose one of clusterqueues" in wrong.stderr
    missing = run("describe", "workload")
    assert missing.returncode == 2 and "name" in missing.stderr
    helped = run("get", "--help")
    assert helped.returncode == 0 and "--namespace" in helped.stdout and "--socket" in helped.stdout


def _complete(shell: str, words: str, cword: int) -> str:
    """What the shell's completion function would get back from ``pykueue`` for ``words``."""
    env = {
        **os.environ,
        "_PYKUEUE_COMPLETE": f"complete_{shell}",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "_TYPER_COMPLETE_ARGS": words,
    }
    code = "import sys\nsys.argv = ['pykueue']\nfrom pykueue.cli.main import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout


def test_completion_sees_every_command_although_a_run_loads_only_one() -> None:
    assert _complete("bash", "pykueue ge", 1).split() == ["get"]
    assert "controller" in _complete("bash", "pykueue co", 1).split()
    assert '"manifests"' in _complete("zsh", "pykueue man", 1)
    assert "--namespace" in _complete("bash", "pykueue get jobs --na", 3).split()


def test_show_completion_prints_a_bash_script_for_pykueue() -> None:
    # typer finds the shell among the process's ancestors, as it would for a user at a prompt, so the
    # command runs under bash; the trailing command keeps bash from replacing itself with python.
    code = (
        "import sys\nsys.argv = ['pykueue', '--show-completion']\nfrom pykueue.cli.main import main\nmain()\n"
    )
    script = '"$0" -c "$1"; exit $?'
    out = subprocess.run(["bash", "-c", script, sys.executable, code], capture_output=True, text=True).stdout
    assert "complete -o default -F _pykueue_completion pykueue" in out


@pytest.mark.parametrize(
    "argv", [("--help",), ("submit", "--help"), ("scenario", "run", "--help"), ("up", "-h")]
)
def test_help_is_printed_without_loading_typer(argv: tuple[str, ...]) -> None:
    out, loaded = _loaded_by_main(*argv)
    assert out.startswith("Usage: pykueue"), out
    assert not loaded & {"typer", "click", "pydantic"}, loaded


def test_the_top_level_help_lists_every_command_in_its_own_words() -> None:
    import typer

    from pykueue.cli import main

    commands = typer.main.get_command(main.build_app([])).commands  # type: ignore[attr-defined]
    assert set(main.SUMMARIES) == set(commands)
    for name, command in commands.items():
        assert (command.help or "").strip().splitlines()[0] == main.SUMMARIES[name], name
    text = main.top_level_help()
    assert all(f"  {name} " in text for name in main.SUMMARIES)


def test_the_kept_help_texts_are_what_the_commands_print_now() -> None:
    """Stale help after a changed option fails here: regenerate with
    `python -m pykueue.cli.help_render --write`."""
    from pykueue.cli import help_cache, help_render

    assert help_cache.lookup_all() == help_render.render()
