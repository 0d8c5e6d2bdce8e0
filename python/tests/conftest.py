"""Shared fixtures: small budgets (the suite runs on two cores) and the built `grove` binary."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def grove_binary():
    """The command-line binary the equality tests compare with: $GROVE_BIN, else the release
    build of this checkout (built by `cargo build --release` or `cargo test --release`)."""
    path = pathlib.Path(os.environ.get("GROVE_BIN", REPO / "target" / "release" / "grove"))
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `cargo build --release` first (or set GROVE_BIN)")
    return path


@pytest.fixture(scope="session")
def grove_cli():
    """Runs `grove ARGS...` from the repository root; returns the completed process."""
    binary = grove_binary()

    def run(*args, check=True):
        env = {**os.environ, "GROVE_DEVICE": "cpu"}
        out = subprocess.run([str(binary), *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True)
        if check and out.returncode != 0:
            raise AssertionError(f"grove {' '.join(map(str, args))} failed:\n{out.stderr}")
        return out

    return run


class interrupt_soon:
    """Sends SIGINT to the main thread 0.5 s after entering, then every 0.5 s until the block
    ends (as a user pressing Ctrl-C until the run stops), with Python's own SIGINT handler in
    place meanwhile: a process started in the background by a shell without job control
    inherits SIGINT ignored, and Python then never raises KeyboardInterrupt (the suite hung
    there in a run of a million generations)."""

    def __enter__(self):
        import signal
        import threading

        self._previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._done = threading.Event()
        main = threading.main_thread().ident

        def send():
            while not self._done.wait(0.5):
                signal.pthread_kill(main, signal.SIGINT)

        self._thread = threading.Thread(target=send, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        import signal

        self._done.set()
        self._thread.join()
        signal.signal(signal.SIGINT, self._previous)
        return False
