"""The fourteen MCP tools. Each validates its parameters (the signature is the schema),
makes one call to the service that owns the work, and shapes the result in one line.
No business logic lives here: defaults and limits are the contract's, the work is the services'.

Failures all leave through `GatewayTool.run`, in the contract's error shape with isError set:
bad arguments (naming the parameter and what it accepts), domain errors from the services
(their messages, which say what to do), and anything else (a generic message; the log has it).

This module holds what every tool shares: the tool class, the registry the tool modules fill, and
the annotations; the tools themselves are in query.py, catalog.py and ingest.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf.descriptor import Descriptor
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from alexandria.errors import AlexandriaError
from gateway.results import INTERNAL_ERROR_MESSAGE, error_result, result_schema
from gateway.shutdown import ToolCalls

log = logging.getLogger(__name__)

Scope = Literal["read", "ingest"]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
REMOVES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# How much of a rejected value an error message echoes back.
_ECHO_CHARS = 80


class GatewayTool(Tool):
    """An MCP tool that knows its auth scope and backing service, and fails in the contract's shape."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scope: Scope = "ingest"  # fail closed: a tool that forgot its scope needs the stronger one
    service: str = ""
    max_arg_chars: int = 4096
    calls: ToolCalls = Field(default_factory=lambda: ToolCalls(0.0), exclude=True)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        """Check the arguments, run the tool, and turn every failure into the contract's error result."""
        problem = self._argument_problem(arguments)
        if problem is not None:
            log.info("%s rejected its arguments: %s", self.name, problem)
            return error_result(problem)
        try:
            run_tool = super().run
            return await self.calls.run(self.name, lambda: run_tool(arguments, context, convert_result))
        except MCPError:
            raise  # a protocol error, answered as such by the SDK
        except Exception as exc:  # noqa: BLE001 - the SDK wraps what the tool raised; this unwraps it once
            return self._failure(exc.__cause__ or exc)

    def _argument_problem(self, arguments: dict[str, Any]) -> str | None:
        accepted = list(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - set(accepted))
        if unknown:
            takes = f"it takes: {', '.join(accepted)}" if accepted else "it takes no parameters"
            return f"Unknown parameter {', '.join(map(repr, unknown))} for {self.name}; {takes}."
        properties = self.parameters.get("properties", {})
        for name, value in arguments.items():
            if _holds_boolean(value) and "boolean" not in _schema_types(properties[name]):
                # Pydantic's lax mode would take true as 1: book_id true would remove book 1.
                return (f"Invalid arguments for {self.name}: '{name}' takes no true or false (got {json.dumps(value)}); "
                        "pass what its schema says. Fix it and call again.")
            if _longest_string(value) > self.max_arg_chars:
                return (
                    f"Parameter '{name}' is longer than {self.max_arg_chars} characters, the gateway's limit "
                    "(GATEWAY_MAX_ARG_CHARS); shorten it and call again."
                )
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            return f"Invalid arguments for {self.name}: {describe_validation_error(exc)}. Fix them and call again."
        return None

    def _failure(self, cause: BaseException) -> CallToolResult:
        if isinstance(cause, AlexandriaError):
            log.info("%s: %s: %s", self.name, type(cause).__name__, cause.message)
            return error_result(cause.message)
        log.error("%s failed unexpectedly", self.name, exc_info=cause)
        return error_result(INTERNAL_ERROR_MESSAGE)


def _holds_boolean(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, list) and any(isinstance(item, bool) for item in value))


def _schema_types(schema: Any) -> set[str]:
    """Every JSON type a parameter's schema names, in its alternatives and items too."""
    if isinstance(schema, list):
        return set().union(*map(_schema_types, schema))
    if not isinstance(schema, dict):
        return set()
    named = schema.get("type")
    return ({named} if isinstance(named, str) else set()).union(*map(_schema_types, schema.values()))


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return max((_longest_string(item) for item in value), default=0)
    return 0


def describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors as one line per parameter: its name, what it accepts, and what it got."""
    problems = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"'{name}' is required")
        else:
            got = repr(error["input"])
            got = got if len(got) <= _ECHO_CHARS else got[:_ECHO_CHARS] + "..."
            problems.append(f"'{name}': {error['msg']} (got {got})")
    return "; ".join(problems)


@dataclass(frozen=True)
class _ToolSpec:
    fn: Callable[..., Awaitable[CallToolResult]]
    title: str
    scope: Scope
    service: str
    annotations: ToolAnnotations
    output_schema: dict[str, Any]


_SPECS: list[_ToolSpec] = []


def register_tool(
    *,
    title: str,
    scope: Scope,
    service: str,
    annotations: ToolAnnotations,
    output: Descriptor | dict[str, Any],
) -> Callable[[Callable[..., Awaitable[CallToolResult]]], Callable[..., Awaitable[CallToolResult]]]:
    """Declare a tool: its title, auth scope, backing service, annotations, and result message (or schema)."""

    def register(fn: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Awaitable[CallToolResult]]:
        schema = output if isinstance(output, dict) else result_schema(output)
        _SPECS.append(_ToolSpec(fn, title, scope, service, annotations, schema))
        return fn

    return register


def build_tools(max_arg_chars: int, calls: ToolCalls) -> list[GatewayTool]:
    """Fresh tool objects for one MCP server, string arguments capped at `max_arg_chars` characters, each
    call run through `calls` (which ends them when the gateway stops)."""
    tools = []
    for spec in _SPECS:
        tool = GatewayTool.from_function(spec.fn, title=spec.title, annotations=spec.annotations)
        tool.scope = spec.scope
        tool.service = spec.service
        tool.max_arg_chars = max_arg_chars
        tool.calls = calls
        # Results are built from proto descriptors, so is their schema; the SDK publishes it as outputSchema.
        tool.fn_metadata.output_schema = spec.output_schema
        tools.append(tool)
    return tools

