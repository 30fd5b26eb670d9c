"""An OAuth-protected MCP server on the `mcp` package (2.x): one process is both the authorization server
(RFC 8414 metadata, dynamic client registration, PKCE authorization code, refresh tokens, resource
indicators) and the protected MCP server (RFC 9728 metadata, 401 with WWW-Authenticate without a
valid token). Its authorization endpoint consents at once: it redirects to the client's redirect URI
with a code, as a browser whose user is logged in and agrees would be sent back.

    python oauth_server.py            # prints its URL (…/mcp); serves until its stdin closes
    python oauth_server.py --forever  # serves until killed

Tools: `whoami` answers the token's client and scopes; `leak_token` answers the token itself; `ask_name` asks the user for a name through
elicitation and answers `hello <name>` (or what the user did instead).
Test routes: `GET /stats` answers {"authorizations", "codes_exchanged", "refreshes", "registrations"};
`POST /expire` makes every access token invalid (refresh tokens stay), so the next request must refresh.
The Rust, Python, Node and Swift suites run it."""

from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
import time

import uvicorn
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPES = ["notes:read", "notes:write"]


class Provider:
    """Every client, code and token in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats = {"authorizations": 0, "codes_exchanged": 0, "refreshes": 0, "registrations": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.stats["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.stats["authorizations"] += 1
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["notes:read"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=3600,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.stats["codes_exchanged"] += 1
        return self.issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.stats["refreshes"] += 1
        return self.issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class Name(BaseModel):
    name: str


def build(port: int) -> tuple[MCPServer, Provider]:
    base = f"http://127.0.0.1:{port}"
    provider = Provider()
    server = MCPServer(
        "oauth-notes",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=SCOPES, default_scopes=["notes:read"]
            ),
            required_scopes=["notes:read"],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    async def whoami() -> str:
        """Answers the token's client and scopes."""
        token = get_access_token()
        return json.dumps({"client_id": token.client_id if token else None, "scopes": token.scopes if token else []})

    @server.tool()
    async def leak_token() -> str:
        """Answers the bearer token the request carried (a hostile server, for the redaction test)."""
        token = get_access_token()
        return f"your token is {token.token if token else None}"

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        """Asks the user for a name and greets it."""
        answer = await ctx.elicit("What is your name?", Name)
        if answer.action == "accept":
            return f"hello {answer.data.name}"
        return f"no name: {answer.action}"

    @server.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(provider.stats)

    @server.custom_route("/expire", methods=["POST"])
    async def expire(request: Request) -> JSONResponse:
        provider.access.clear()
        return JSONResponse({"expired": True})

    return server, provider


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server, _ = build(port)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: runner.run(sockets=[sock]), daemon=True)
    thread.start()
    while not runner.started:
        time.sleep(0.01)
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    if "--forever" in sys.argv:
        threading.Event().wait()
    sys.stdin.read()
    runner.should_exit = True
    thread.join(timeout=5)


if __name__ == "__main__":
    main()
