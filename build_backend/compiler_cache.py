"""The compiler cache's server: sccache compiles in a server that its first client starts. Ninja's first
compiles run in parallel, and each would start one: over TCP the losers fail to bind and their compiles
run uncached; over a unix socket (SCCACHE_SERVER_UDS) sccache 0.16 lets a later server take the socket
over, leaving several servers on one cache with the statistics split between them. So the build starts
it once, before the first compile, when a launcher is sccache. It outlives the build, as sccache's own
would (SCCACHE_IDLE_TIMEOUT, `sccache --stop-server`). ccache has no server."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Mapping

from build_backend import log
from buildcore.toolchain.launcher import Launchers


def start_servers(launchers: Launchers, environ: Mapping[str, str]) -> None:
    """Start the server of each sccache the launchers use, in the user's environment (it outlives the build's
    private temporary directory). Over TCP a server already running makes the start fail harmlessly (the
    address is taken); a unix socket that answers is left alone. A server that does not start is left to
    sccache's own start-up."""
    programs = {
        x.program for x in (*launchers.cmake.values(), launchers.rustc) if x is not None and x.kind == "sccache"
    }
    uds = environ.get("SCCACHE_SERVER_UDS", "")
    for program in sorted(programs):
        if uds and _answers(uds):
            continue
        try:
            started = subprocess.run([program, "--start-server"], env=dict(environ), capture_output=True, check=False)
        except OSError as err:
            log.info(f"compiler cache: could not run {program} ({err.strerror}); sccache starts its server itself")
            continue
        if started.returncode == 0:
            log.info(f"compiler cache: started the server of {program}")


def _answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(path)
        except OSError:
            return False
    return True
