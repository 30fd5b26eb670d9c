"""The packages as users get them: installs the built wheel (or the npm tarballs) into a fresh environment
outside the tree and runs the examples, the README's install snippets and the type checks against the
installed copy, the loopback provider standing in for the model. Run by scripts/test-packages.sh:

    python3 tests/packages/check.py python|node --dist DIR --provider BIN --work DIR [--tools DIR]

Standard library only. Each check prints one line; the first failure exits non-zero saying what was wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_block import block  # noqa: E402

SCRIPTED = REPO / "examples" / "scripted" / "weather.json"
ANSWER = "(scripted) In Paris it is sunny and 22 °C."
NO_SERVER = "http://127.0.0.1:9/v1"


def readme(lang: str, nth: int) -> str:
    return block((REPO / "README.md").read_text(encoding="utf-8"), "Install", lang, nth)


def ok(what: str) -> None:
    print(f"  ok  {what}", flush=True)


def fail(what: str, out: subprocess.CompletedProcess[str] | None = None) -> None:
    detail = "" if out is None else f"\n--- exit {out.returncode}\n--- stdout:\n{out.stdout}\n--- stderr:\n{out.stderr}"
    sys.exit(f"FAIL {what}{detail}")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell has: no model configured, nothing of the tree's on any path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PYTHONPATH", "NODE_PATH", "VIRTUAL_ENV", "AMBIT_PROVIDER_BIN")}
    env.update(extra)
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str], what: str, expect_ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if (out.returncode == 0) != expect_ok:
        fail(what, out)
    return out


@contextlib.contextmanager
def provider(binary: str) -> Iterator[str]:
    """The loopback provider serving the demo's scripted answers; its base URL."""
    proc = subprocess.Popen([binary, "--exit-on-eof", str(SCRIPTED)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def copy_example(work: Path, lang: str, name: str) -> Path:
    """The example and the scripted answers it reads (``../scripted``), laid out as in the repository."""
    (work / "examples" / lang).mkdir(parents=True, exist_ok=True)
    (work / "examples" / "scripted").mkdir(parents=True, exist_ok=True)
    shutil.copy(SCRIPTED, work / "examples" / "scripted" / SCRIPTED.name)
    return Path(shutil.copy(REPO / "examples" / lang / name, work / "examples" / lang / name))


def size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def check_python(args: argparse.Namespace) -> None:
    work: Path = args.work
    wheels = sorted(args.dist.glob("ambit_sdk-*.whl"))
    sdists = sorted(args.dist.glob("ambit_sdk-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"expected one wheel and one sdist in {args.dist}, found {wheels + sdists}")
    wheel = wheels[0]
    tags = wheel.name.removesuffix(".whl").split("-")[2:]
    if tags[:2] != ["cp310", "abi3"] or "manylinux" not in tags[2]:
        fail(f"the wheel {wheel.name} is not cp310-abi3-manylinux")
    ok(f"wheel {wheel.name} ({size(wheel)}), sdist {sdists[0].name} ({size(sdists[0])})")

    # The oldest CPython the abi3 wheel promises when the machine has it (--python), else this one.
    python = args.python or sys.executable
    venv = work / "venv"
    run([python, "-m", "venv", str(venv)], work, clean_env(), "make a fresh virtualenv")
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", str(wheel)], work,
        clean_env(), f"pip install {wheel.name}")
    out = run([py, "-c", "import sys, ambit, ambit._native as n; print(sys.version.split()[0], ambit.__file__, n.__file__)"],
              work, clean_env(), "import the installed package")
    version, package, module = out.stdout.split()
    if not package.startswith(str(venv)) or not module.startswith(str(venv)):
        fail(f"ambit was imported from {package} and {module}, not from the fresh virtualenv {venv}")
    stripped = subprocess.run(["file", module], capture_output=True, text=True).stdout
    if "not stripped" in stripped:
        fail(f"the native module is not stripped: {stripped}")
    ok(f"installed into a fresh Python {version} virtualenv; native module {Path(module).name} ({size(Path(module))}, stripped)")

    # The demo, as a user runs it: no model configured, the loopback provider with scripted answers.
    example = copy_example(work, "python", "weather.py")
    out = run([py, str(example), "Weather in Paris?"], work, clean_env(AMBIT_PROVIDER_BIN=args.provider),
              "examples/python/weather.py against the installed wheel")
    if "SCRIPTED" not in out.stdout or ANSWER not in out.stdout or "tool get_weather({'city': 'Paris'})" not in out.stdout:
        fail("examples/python/weather.py printed the wrong answer", out)
    ok("examples/python/weather.py runs against the installed wheel (loopback provider)")

    # The README's install snippet, exactly as written, with the loopback provider as its server.
    snippet = work / "snippet.py"
    snippet.write_text(readme("python", 1))
    with provider(args.provider) as url:
        out = run([py, str(snippet)], work, clean_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-scripted"),
                  "the README's Python install snippet")
    if ANSWER not in out.stdout:
        fail("the README's Python snippet printed the wrong answer", out)
    ok("the README's Python install snippet runs against the installed wheel")
    # The negative control: with no server where it points, the same snippet fails with ambit's error,
    # so the answer above came from the server through the installed package.
    out = run([py, str(snippet)], work, clean_env(OPENAI_BASE_URL=NO_SERVER, OPENAI_API_KEY="none"),
              "the README's Python snippet with no server", expect_ok=False)
    if "ambit.errors.ModelError" not in out.stderr and "ModelError" not in out.stderr:
        fail("the README's Python snippet without a server did not fail with ambit's ModelError", out)
    ok("negative control: the snippet without a server fails with ModelError")


def npm(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    return run(["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"], cwd, clean_env(), what)


def check_node(args: argparse.Namespace) -> None:
    work: Path = args.work
    main = sorted(p for p in args.dist.glob("ambit-sdk-*.tgz") if not p.name.startswith("ambit-sdk-linux-"))
    platform = sorted(args.dist.glob("ambit-sdk-linux-x64-gnu-*.tgz"))
    if len(main) != 1 or len(platform) != 1:
        fail(f"expected the main and the linux-x64-gnu tarballs in {args.dist}, found {main + platform}")
    ok(f"npm tarballs {main[0].name} ({size(main[0])}), {platform[0].name} ({size(platform[0])})")

    app = work / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0", "private": True}))
    npm(["install", str(main[0]), str(platform[0])], app, "npm install the tarballs into a fresh project")
    installed = app / "node_modules" / "ambit-sdk"
    declared = json.loads((installed / "package.json").read_text())["optionalDependencies"]
    platforms = sorted(name.removeprefix("ambit-sdk-") for name in declared)
    if platforms != ["darwin-arm64", "darwin-x64", "linux-arm64-gnu", "linux-x64-gnu", "win32-x64-msvc"]:
        fail(f"the installed package declares the platform packages {declared}")
    if list(installed.rglob("*.node")):
        fail(f"the main package holds a binary: {list(installed.rglob('*.node'))}")
    binary = app / "node_modules" / "ambit-sdk-linux-x64-gnu" / "ambit.linux-x64-gnu.node"
    ok(f"installed into a fresh project: the main package declares {len(platforms)} platform packages; "
       f"the binary comes from ambit-sdk-linux-x64-gnu ({size(binary)})")

    # CommonJS and ESM: the README's two snippets, exactly as written.
    (app / "cjs.js").write_text(readme("js", 1))
    (app / "esm.mjs").write_text(readme("js", 2))
    for name in ("cjs.js", "esm.mjs"):
        with provider(args.provider) as url:
            out = run(["node", name], app, clean_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-scripted"),
                      f"the README's Node install snippet {name}")
        if ANSWER not in out.stdout:
            fail(f"the README's Node snippet {name} printed the wrong answer", out)
        ok(f"the README's {'CommonJS' if name.endswith('.js') else 'ESM'} snippet runs against the installed package")
    out = run(["node", "esm.mjs"], app, clean_env(OPENAI_BASE_URL=NO_SERVER, OPENAI_API_KEY="none"),
              "the README's ESM snippet with no server", expect_ok=False)
    if "ModelError" not in out.stderr and "model_transport" not in out.stderr:
        fail("the README's ESM snippet without a server did not fail with ambit's error", out)
    ok("negative control: the snippet without a server fails with ambit's error")

    # The demo, requiring the package by its name as a user's copy does.
    example = copy_example(app, "node", "weather.js")
    text = example.read_text()
    local = "require('../../bindings-node')"
    if local not in text:
        fail(f"examples/node/weather.js no longer has {local}: update this check")
    example.write_text(text.replace(local, "require('ambit-sdk')"))
    out = run(["node", str(example)], app, clean_env(AMBIT_PROVIDER_BIN=args.provider),
              "examples/node/weather.js against the installed package")
    if "SCRIPTED" not in out.stdout or ANSWER not in out.stdout:
        fail("examples/node/weather.js printed the wrong answer", out)
    ok("examples/node/weather.js runs against the installed package (loopback provider)")

    # tsc --strict of the ESM snippet against the installed package's .d.ts, and a negative control: a
    # misuse the types must refuse.
    tsc = [str(args.tools / "node_modules" / ".bin" / "tsc"), "--strict", "--noEmit", "--module", "nodenext",
           "--moduleResolution", "nodenext", "--target", "es2022", "--types", "node",
           "--typeRoots", str(args.tools / "node_modules" / "@types")]
    (app / "snippet.mts").write_text(readme("js", 2))
    run([*tsc, "snippet.mts"], app, clean_env(), "tsc --strict of the README's ESM snippet")
    (app / "wrong.mts").write_text(readme("js", 2) + 'const n: number = (await new Agent({ model: "m" }).run("hi")).output;\n')
    out = run([*tsc, "wrong.mts"], app, clean_env(), "tsc --strict of a misuse", expect_ok=False)
    if "wrong.mts" not in out.stdout or "TS2322" not in out.stdout:
        fail("tsc did not refuse the misuse where expected", out)
    ok("tsc --strict: the README's snippet type-checks against the installed .d.ts; a misuse is refused (TS2322)")

    # The negative control of the platform layout: without its platform package, the main package
    # cannot load (it holds no binary of its own).
    shutil.rmtree(app / "node_modules" / "ambit-sdk-linux-x64-gnu")
    out = run(["node", "-e", "require('ambit-sdk')"], app, clean_env(), "require without the platform package",
              expect_ok=False)
    if "ambit-sdk-linux-x64-gnu" not in out.stderr and "native binding" not in out.stderr:
        fail("require('ambit-sdk') without its platform package failed for another reason", out)
    ok("negative control: without ambit-sdk-linux-x64-gnu, require('ambit-sdk') fails to load the native binding")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["python", "node"])
    parser.add_argument("--dist", type=Path, required=True)
    parser.add_argument("--provider", required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--tools", type=Path)
    parser.add_argument("--python", help="the interpreter of the fresh virtualenv")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    check_python(args) if args.what == "python" else check_node(args)


if __name__ == "__main__":
    main()
