"""Azurite, the Azure Blob Storage emulator, for campaigns and the tests.

Azurite (npm package `azurite`) is installed into a project-local prefix
(`.node/`, ignored by git) on first use, and started on 127.0.0.1 with a port
the kernel picks (`--blobPort 0`, read back from Azurite's own startup line, so
there is no race for a free port), in-memory storage (or a folder given with
`location`), `--skipApiVersionCheck` (the current azure-storage-blob speaks a
newer REST version than Azurite knows) and `--loose`. It is stopped by PID.

Points reach it through `MOVEBENCH_AZURITE_CONNECTION_STRING` (the io family's
`blob.emulator: azurite` reads that variable, and never AZURE_STORAGE_CONNECTION_STRING,
which may hold a real account's), put into the environment that Snakemake, and so
every point job, inherits: by the workflow itself when a blob point on the emulator is
about to run (the io family's `services` hook, entered in the Snakefile's onstart), by
`run -- COMMAND` below, or by `eval "$(python -m movebench.services.azurite env)"`
after `up` (then the workflow uses that one). Azurite's
account key is the public development key; it is still a secret as far as
records, meta and logs go (movebench.core.envinfo redacts `AccountKey=`).

    python -m movebench.services.azurite run -- snakemake ...   start, run the command, stop
    python -m movebench.services.azurite up | env | status | down
    python -m movebench.services.azurite install
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ACCOUNT = "devstoreaccount1"
# Azurite's well-known development key (public, documented by Microsoft); never a real account's.
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# Not AZURE_STORAGE_CONNECTION_STRING: a real account's string there must never meet an emulated run.
ENV_VAR = "MOVEBENCH_AZURITE_CONNECTION_STRING"
VERSION = "3"
_LISTENING = re.compile(r"Blob service (?:is )?successfully listens on https?://[\d.]+:(\d+)")


class AzuriteError(RuntimeError):
    """Azurite could not be installed or started; the message says what to do."""


def project_root() -> Path:
    return Path(__file__).resolve().parents[3]


def prefix() -> Path:
    return Path(os.environ.get("MOVEBENCH_NODE_PREFIX", project_root() / ".node"))


def executable() -> Path:
    return prefix() / "node_modules" / ".bin" / "azurite-blob"


def node_missing() -> str | None:
    """Why Azurite cannot run here (no node or npm), or None."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH: install Node.js (>= 18) and npm to run the blob backend on Azurite"
    return None


def install(quiet: bool = False) -> Path:
    """Azurite in the project-local prefix, installed with npm if it is not there yet."""
    exe = executable()
    if exe.exists():
        return exe
    why = node_missing()
    if why:
        raise AzuriteError(why)
    prefix().mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--prefix", str(prefix()), "--no-audit", "--no-fund", f"azurite@{VERSION}"]
    if not quiet:
        print("movebench: installing Azurite: " + " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not exe.exists():
        raise AzuriteError(f"npm could not install azurite@{VERSION} into {prefix()}:\n{done.stderr[-2000:]}")
    return exe


def connection_string(port: int, host: str = "127.0.0.1") -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint=http://{host}:{port}/{ACCOUNT};"
    )


class Azurite:
    """One Azurite blob service process."""

    def __init__(self, location: str | None = None, port: int = 0, log: str | None = None,
                 die_with_parent: bool = False):
        self.location, self.requested_port, self.log_path = location, port, log
        # Started by a workflow's onstart: if snakemake is killed before its onerror runs, Azurite goes too.
        self.die_with_parent = die_with_parent
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None
        self.port: int | None = None
        self._log = None
        # a log file start() made itself (none was named): removed by stop(), or every campaign and test with
        # blob points would leave one in /tmp
        self._own_log = False

    @property
    def connection_string(self) -> str:
        return connection_string(self.port)

    def command(self) -> list[str]:
        command = [
            str(install()),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.requested_port),
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",
        ]
        if self.location:
            Path(self.location).mkdir(parents=True, exist_ok=True)
            command += ["--location", str(self.location)]
        else:
            command += ["--inMemoryPersistence"]
        return command

    def start(self, timeout: float = 30.0) -> Azurite:
        command = self.command()
        fd, path = tempfile.mkstemp(prefix="azurite-", suffix=".log") if not self.log_path else (None, self.log_path)
        if fd is not None:
            os.close(fd)
            self._own_log = True
        self.log_path = path
        self._log = open(path, "w")
        # Its own session: Ctrl-C at the terminal reaches `run`, which stops it in order.
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.location or tempfile.gettempdir(),
            start_new_session=True,
            preexec_fn=_terminate_with_parent if self.die_with_parent else None,
        )
        self.pid = self.process.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail, status = self.log_tail(), self.process.returncode
                self.stop()
                raise AzuriteError(f"Azurite exited with status {status}:\n{tail}")
            match = _LISTENING.search(Path(path).read_text(errors="replace"))
            if match and answers(int(match.group(1))):
                self.port = int(match.group(1))
                return self
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise AzuriteError(f"Azurite did not answer within {timeout:g} s:\n{tail}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except (OSError, TypeError):
            return ""

    def kill(self) -> None:
        """Die at once, as a crashed service would (tests of a point whose service dies)."""
        stop_pid(self.pid, sig=signal.SIGKILL)

    def stop(self) -> None:
        stop_pid(self.pid)
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_log:
            Path(self.log_path).unlink(missing_ok=True)
            self._own_log = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _terminate_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies (Linux's PR_SET_PDEATHSIG).
    Not SIGTERM: the campaign keeps Azurite stopped between its points (movebench.services.hold), and a stopped
    process holds a SIGTERM pending for ever."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """True once the port answers HTTP (any status: an unsigned request gets 403 or 400)."""
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(f"GET /{ACCOUNT}?comp=list HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            return conn.recv(12).startswith(b"HTTP/1.1")
    except OSError:
        return False


def stop_pid(pid: int | None, sig=signal.SIGTERM, wait: float = 10.0) -> None:
    """Signal `pid`, then SIGKILL it if it is still there after `wait` seconds."""
    if not pid:
        return
    for signum, grace in ((sig, wait), (signal.SIGKILL, wait)):
        try:
            os.kill(pid, signum)
            os.kill(pid, signal.SIGCONT)  # a stopped process (movebench.services.hold) acts on nothing before it
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
            except ChildProcessError:  # not our child (started by `up`): poll for its end
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.05)


# --- the command line: `up` keeps a state file so that `env` and `down` find the process ---


def state_file() -> Path:
    return Path(os.environ.get("MOVEBENCH_AZURITE_STATE", project_root() / ".node" / "azurite.json"))


def _up(args) -> int:
    state = state_file()
    if state.exists():
        old = json.loads(state.read_text())
        if _alive(old["pid"]) and answers(old["port"]):
            print(f"movebench: Azurite already runs (pid {old['pid']}, port {old['port']})", file=sys.stderr)
            return 0
    service = Azurite(location=args.location).start()
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"pid": service.pid, "port": service.port, "log": service.log_path}))
    print(
        f"movebench: Azurite up on 127.0.0.1:{service.port} (pid {service.pid}, log {service.log_path})",
        file=sys.stderr,
    )
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _env(args) -> int:
    state = state_file()
    if not state.exists():
        print("movebench: Azurite is not up (python -m movebench.services.azurite up)", file=sys.stderr)
        return 1
    port = json.loads(state.read_text())["port"]
    print(f"export {ENV_VAR}='{connection_string(port)}'")
    return 0


def _status(args) -> int:
    state = state_file()
    if not state.exists():
        print("down")
        return 1
    info = json.loads(state.read_text())
    up = _alive(info["pid"]) and answers(info["port"])
    print(f"{'up' if up else 'not answering'}: pid {info['pid']}, port {info['port']}")
    return 0 if up else 1


def _down(args) -> int:
    state = state_file()
    if not state.exists():
        return 0
    info = json.loads(state.read_text())
    stop_pid(info["pid"])
    state.unlink()
    print(f"movebench: Azurite stopped (pid {info['pid']})", file=sys.stderr)
    return 0


def _run(args) -> int:
    """Start Azurite, run the command with its connection string exported, stop Azurite whatever happens."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("movebench: azurite run needs a command after --", file=sys.stderr)
        return 2
    env = dict(os.environ)
    why = node_missing()
    if why:
        print(f"movebench: cannot start Azurite: {why}", file=sys.stderr, flush=True)
        return 1
    service = Azurite(location=args.location)
    try:
        service.start()
    except AzuriteError as exc:
        print(f"movebench: could not start Azurite: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        service.stop()
        print("movebench: interrupted while Azurite started; it is stopped", file=sys.stderr, flush=True)
        return 130
    print(
        f"movebench: Azurite up on 127.0.0.1:{service.port} (pid {service.pid}); {ENV_VAR} set for the run",
        file=sys.stderr,
        flush=True,
    )
    env[ENV_VAR] = service.connection_string
    child = None

    def forward(signum, frame):
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    # Ctrl-C reaches the whole foreground process group, the command included: passing it on as well gave
    # snakemake a second SIGINT in the middle of its shutdown (four chained tracebacks instead of its one line).
    # SIGTERM and SIGHUP, sent to this process alone, are passed on (as `python -m movebench run` does).
    handlers = {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: forward, signal.SIGHUP: forward}
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        # An ignored signal stays ignored across exec: the command gets Ctrl-C back.
        child = subprocess.Popen(command, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        service.stop()
        print(f"movebench: Azurite stopped (pid {service.pid})", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m movebench.services.azurite", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (
        ("up", "start Azurite in the background"),
        ("env", "print the export line"),
        ("status", "say whether it answers"),
        ("down", "stop it"),
        ("install", "install Azurite into .node/ with npm"),
        ("run", "start Azurite, run a command with its connection string, stop Azurite"),
    ):
        action = sub.add_parser(name, help=help_text)
        if name in ("up", "run"):
            action.add_argument("--location", help="keep its data in this folder instead of memory")
        if name == "run":
            action.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    try:
        if args.action == "install":
            print(install())
            return 0
        return {"up": _up, "env": _env, "status": _status, "down": _down, "run": _run}[args.action](args)
    except AzuriteError as exc:
        print(f"movebench: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
