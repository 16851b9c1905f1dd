"""The order of the request guards (issue 16), kept in one place: the last one added runs first."""
from __future__ import annotations

from app import login_guard, telemetry, web_guard


def install_guards(app, server_settings) -> None:
    login_guard.install(app, server_settings)
    # Host/Origin/size checks refuse before the login rules or the app see anything.
    web_guard.install(app, server_settings)
    # Outermost: every exception any of them lets out is written to the log file.
    app.add_middleware(telemetry.ErrorLogMiddleware)
