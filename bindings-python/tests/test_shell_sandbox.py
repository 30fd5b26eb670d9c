"""The shell's sandbox attacked through the Python API: the model (the scripted provider) asks the built-in
shell_execute to change a file's metadata outside the workspace, kill a process of the host's user, reach
a unix socket and a UDP socket of the host's, and leave a process behind. Below unrestricted none of it
lands; the negative control runs the same command at unrestricted and sees each attack land (except the
process left behind: every process a call starts ends with the call, at every level).

core/tests/shell_sandbox.rs has the whole set, as root and as uid 65534."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import ambit


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line holds the marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            zombie = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
        except OSError:
            continue
        if marker.encode() in cmdline and not zombie:
            found.append(int(entry.name))
    return found


def spawn_marked(marker: str) -> subprocess.Popen[bytes]:
    victim = subprocess.Popen(["sleep", marker])
    for _ in range(3000):  # bounded polling on a real condition: the exec has happened
        if victim.pid in marked(marker):
            return victim
        subprocess.run(["sleep", "0.01"], check=True)
    raise AssertionError(f"{marker} never ran")


def shell_run(tmp_path: Path, start_provider: Any, level: str, network: str, command: str) -> str:
    scenario = {"name": "shell_sandbox", "wire": "openai_chat", "exchanges": [
        {"expect": {}, "respond": {"tool_calls": [{"id": "s", "name": "shell_execute",
                                                   "arguments": {"command": command}}]}},
        {"expect": {}, "respond": {"content": "done"}},
    ]}
    path = tmp_path / f"shell-{level}.json"
    path.write_text(json.dumps(scenario))
    provider = start_provider(path)
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=provider.base_url), builtins=["shell_execute"],
                        policy=ambit.Policy(level=level, working_directory=tmp_path / "ws", network=network))
    result = agent.run_sync("go")
    assert result.tool_calls[0].name == "shell_execute", result
    return result.tool_calls[0].result


def test_the_shell_changes_nothing_outside_its_sandbox(tmp_path: Path, start_provider: Any) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(tmp_path / "sock"))
    unix.listen()
    unix.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)

    def arrived() -> tuple[bool, bool]:
        got = []
        for receive in (unix.accept, lambda: udp.recv(16)):
            try:
                receive()
                got.append(True)
            except BlockingIOError:
                got.append(False)
        return got[0], got[1]

    for n, level, network in [(1, "read", "none"), (2, "workspace", "none"), (3, "unrestricted", "unrestricted")]:
        f = tmp_path / "outside" / f"f{n}"
        f.write_text("x")
        f.chmod(0o644)
        before = os.stat(f)
        victim = spawn_marked(f"1000.{os.getpid()}{n}1")
        # The escapee's marker is split so that the shell's own command line does not hold it.
        escapee = f"1000.{os.getpid()}{n}2"
        head, tail = escapee.split(".")
        command = (
            f"chmod 777 {f}; touch -d 2001-01-01 {f}; "
            f"/usr/bin/python3 -c 'import os; os.setxattr(\"{f}\", \"user.ambit\", b\"1\")'; "
            f"kill -9 {victim.pid}; echo kill=$?; "
            f"/usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{tmp_path}/sock\")'; "
            f"/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
            f".sendto(b\"x\", (\"127.0.0.1\", {udp.getsockname()[1]}))'; "
            f"H={head}.; setsid sleep ${{H}}{tail} & "
            f"until grep -q '{head}[.]{tail}' /proc/[0-9]*/cmdline 2>/dev/null; do :; done; echo started"
        )
        out = shell_run(tmp_path, start_provider, level, network, command)
        after = os.stat(f)
        changed = (after.st_mode, after.st_mtime_ns, after.st_ctime_ns) != (before.st_mode, before.st_mtime_ns,
                                                                           before.st_ctime_ns)
        killed = victim.poll() is not None or "kill=0" in out
        if level == "unrestricted":
            # The negative control: every attack lands.
            assert changed and killed and arrived() == (True, True), out
            assert os.getxattr(f, "user.ambit") == b"1"
        else:
            assert not changed and not killed and arrived() == (False, False), f"{level}: {out}"
            assert "user.ambit" not in os.listxattr(f)
        victim.kill()
        victim.wait()
        # The escapee was started (the command saw it) and ended with the call, at every level.
        assert "started" in out and marked(escapee) == [], f"{level}: {out}"


def test_list_tools_says_what_confines_the_shell(tmp_path: Path) -> None:
    agent = ambit.Agent(model="m", builtins=["shell_execute", "file_read"],
                        policy=ambit.Policy(level="read", working_directory=tmp_path))
    listed = {t.name: t for t in agent.list_tools()}
    shell = listed["shell_execute"]
    assert (shell.declared_level, shell.status) == ("read", "offered"), shell
    assert shell.confinement is not None and "Landlock ABI" in shell.confinement, shell
    assert "namespaces" in shell.confinement and "seccomp" in shell.confinement, shell
    assert listed["file_read"].confinement is None
