from typing import Any, Awaitable, Callable

__version__: str

class NativeAgent:
    def __init__(
        self,
        model: str,
        tools: list[tuple[str, str, str, Callable[[str], Any], bool]],
        base_url: str | None = None,
        api_key: str | None = None,
        instructions: str | None = None,
        max_turns: int | None = None,
    ) -> None: ...
    def run(self, input: str) -> Awaitable[str]: ...
    def tool_names(self) -> list[str]: ...
