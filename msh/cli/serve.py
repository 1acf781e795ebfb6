"""``msh serve``: run the MSH of the settings file (the inbound endpoint, sending, resends, timers)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from msh.cli.common import Subcommands, add_command

__all__ = ["add_serve_command"]


@contextlib.contextmanager
def _on_sigterm(handler: Callable[[int, Any], None] | int) -> Iterator[None]:
    """SIGTERM handled by ``handler`` (or ``signal.SIG_IGN``) while inside (in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _serve(args: argparse.Namespace) -> int:
    from msh.cli.logformat import configure_logging
    from msh.runtime.config import describe, load_settings
    from msh.runtime.msh import Msh
    from msh.runtime.pidfile import refuse_if_running, remove_pid_file, write_pid_file
    from msh.runtime.serving import bind, run

    configure_logging(args.log_level, args.log_format)
    # Until the server takes the signals over, SIGTERM ends start-up like Ctrl-C.
    with _on_sigterm(_interrupt):
        try:
            settings = _settings(args.config, load_settings)
            if args.print_settings:
                print(describe(settings))
                return 0
            if settings.server.pid_file is not None:
                refuse_if_running(settings.server.pid_file)  # another msh serve of these settings: say so first
            sock = bind(settings.server.host, settings.server.port)  # a busy port fails before the store opens
            companions: list[Any] = []
            schedules: list[Any] = []
            try:
                msh = Msh(settings)
                try:  # the tokens are read and the ports bound now: a problem stops the start here
                    companions.extend(_companions(settings, msh))
                except BaseException:
                    msh.close()
                    raise
                if settings.retention.enabled:
                    schedules.append(msh.purge_schedule())  # retention: purges every retention.interval
            except BaseException:
                sock.close()
                raise
        except KeyboardInterrupt:
            print("msh: stopped while starting (nothing was served)", flush=True)
            return 0
    scheme = "https" if settings.server.tls else "http"
    agreements = ", ".join(c.cpaid for c in msh.registry) or "none"
    routes = len(settings.routing.routes)
    routing = f"; {routes} route{'' if routes == 1 else 's'}" if routes else ""

    listening = False

    def ready(port: int) -> None:
        nonlocal listening
        listening = True
        if settings.server.pid_file is not None:  # written once SIGHUP reloads (msh.runtime.pidfile)
            write_pid_file(settings.server.pid_file)
        print(
            f"msh: party {settings.identity.party_id} listening on {scheme}://{settings.server.host}:{port}"
            f"{settings.server.path} (store {msh.store.url}; agreements {agreements}{routing})",
            flush=True,
        )
        for companion in companions:
            if hasattr(companion, "announce"):
                print(companion.announce, flush=True)

    failed = True
    try:
        # SIGINT and SIGTERM stop the server in order (msh.runtime.serving.serve); the process then ends here.
        run(settings, msh, sock=sock, ready=ready, companions=[*companions, *schedules])
        failed = False
    finally:
        # While the last transaction commits, a repeated SIGTERM must not cut it short (a second Ctrl-C
        # still can: the user insists).
        with _on_sigterm(signal.SIG_IGN):
            if settings.server.pid_file is not None:
                remove_pid_file(settings.server.pid_file)
            msh.close()
            counts = ", ".join(f"{k} {v}" for k, v in sorted(msh.counters.items()))
            if listening:
                print(f"msh: stopped ({counts or 'no traffic'})", flush=True)
            elif not failed:
                print("msh: stopped while starting (nothing was served)", flush=True)
            # else: it never started; the error line that follows says why (no "stopped" before it).
    return 0


def _settings(path: str | None, load: Callable[[str | None], Any]) -> Any:
    """The settings of ``--config`` (or ``MSH_CONFIG``); with neither, and the environment's MSH_<SECTION>_<KEY>
    variables not enough on their own, one line saying how to give a settings file."""
    from msh.errors import ConfigurationError, MshError

    if path is not None or os.environ.get("MSH_CONFIG", "").strip():
        return load(path)
    try:
        return load(None)
    except MshError:
        raise ConfigurationError(
            "no settings file: give one with --config FILE or the environment variable MSH_CONFIG=FILE "
            "(msh init DIR writes one)"
        ) from None


def _companions(settings: Any, msh: Any) -> list[Any]:
    """What ``msh serve`` runs beside the endpoint: the expiring-certificate warnings, the application
    interfaces (``api.enabled``), the admin port (``admin.enabled``) and the receivers of other transports."""
    from msh.runtime.certificates import CertificateWatch, certificates_in_use
    from msh.runtime.receivers import receivers_from

    found: list[Any] = [
        CertificateWatch(
            lambda: certificates_in_use(settings, msh.registry),
            settings.admin.certificate_warning,
            msh.clock,
            agreements=lambda: msh.registry,  # agreements outside tp:Start..tp:End are warned about too
        )
    ]
    if settings.api.enabled:
        from msh.api.server import ApiServer

        found.append(ApiServer(settings, msh))
    if settings.admin.enabled:
        from msh.admin.server import AdminServer
        from msh.console.app import build_console

        found.append(AdminServer(settings, msh, extra=build_console(msh, settings)))
    found.extend(receivers_from(settings, msh))  # mail and queue receivers (docs/transports.md)
    return found


def add_serve_command(sub: Subcommands) -> None:
    """Add ``msh serve``."""
    serve = add_command(
        sub,
        "serve",
        _serve,
        help="run the MSH: the inbound endpoint, sending and retries",
        description=(
            "Run the MSH described by the settings file: load the agreements, open the store, listen for "
            "ebXML messages on server.host:server.port (HTTPS with mutual TLS unless server.tls is false), "
            "send submitted messages and resend them until acknowledged or given up. Each failed transmission "
            "is logged at warning level with its reason (and kept for msh status). Ctrl-C or SIGTERM stops it "
            "in order: no new connections, requests and transmissions in flight end, what is queued is "
            "committed, the line 'msh: stopped (...)' is printed and the exit status is 0. SIGHUP reloads the "
            "agreements without a restart (a set with a problem changes nothing; the log says why); with "
            "server.pid_file the process id is written there while it serves (msh cpa add|remove|reload use "
            "it). A hard kill "
            "(SIGKILL) loses nothing that was committed. With api.enabled, the application interfaces (REST with "
            "OpenAPI at {api.path}/openapi.json, pull batches, SOAP, webhooks) are served on api.host:api.port by "
            "the same process; with admin.enabled, /health, /ready, /metrics (Prometheus) and the console on "
            "admin.host:admin.port (docs/operating.md). Certificates that expire within admin.certificate_warning "
            "are warned about at start and daily, and so are certificates not valid yet and agreements outside their "
            "validity window (tp:Start..tp:End). Exit status 2 when it cannot start (the line says why)."
        ),
        config=True,
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines (default) or JSON lines with time, level, logger, message and, where known, messageId, "
        "cpaId, partner, event",
    )
    serve.add_argument("--print-settings", action="store_true", help="print the effective settings and exit")
