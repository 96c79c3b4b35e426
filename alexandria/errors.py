"""Errors cross each boundary once, on purpose, and this module is that crossing.

Domain code raises an `AlexandriaError` subclass. The server edge
(`ErrorMappingInterceptor`, installed by `alexandria.grpc_server`) turns it into a
gRPC status with the same code and message. The client edge (`from_rpc_error`,
used by `alexandria.clients`) turns the status back into the same typed exception,
so the gateway can render the contract's error shape. Anything else escaping a
servicer is a bug: it is logged with its traceback and reaches the caller as
INTERNAL with a message that hides internals.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, ClassVar, TypeVar, cast

import grpc
from grpc import aio

log = logging.getLogger(__name__)

_TRequest = TypeVar("_TRequest")
_TResponse = TypeVar("_TResponse")
# A servicer method's context: this module wraps every method, whatever its messages.
AnyContext = aio.ServicerContext[Any, Any]


class AlexandriaError(Exception):
    """Base of every error meant for the caller. The message says what went wrong and what to do."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(AlexandriaError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AlexandriaError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AlexandriaError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(AlexandriaError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(AlexandriaError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(AlexandriaError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(AlexandriaError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AlexandriaError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(AlexandriaError):
    code = grpc.StatusCode.CANCELLED


class InternalError(AlexandriaError):
    code = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[AlexandriaError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
        InternalError,
    )
}

OWN_SERVICES_PREFIX = "/alexandria."
# Trailing metadata marking a status as a domain error whose message is meant for the caller.
DOMAIN_ERROR_KEY = "alexandria-domain-error"
INTERNAL_MESSAGE = "Internal error in the {service} service; the details are in its log."


def from_rpc_error(error: grpc.RpcError, target: str) -> AlexandriaError:
    """Turn a gRPC status received from `target` back into the typed exception it was raised as."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    cls = _BY_CODE.get(code, InternalError)
    if raised_by_a_service(error) and details:
        return cls(details)
    if code == grpc.StatusCode.UNAVAILABLE:
        # The details name peer addresses: they go to the log, never to the caller.
        log.warning("%s unavailable: %s", target, details)
        return Unavailable(f"The {target} service is unavailable (stopped, or restarting after a crash); "
                           "try again in a few seconds, and check that it is running if this persists.")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"The {target} service did not answer in time; try again or raise the deadline.")
    if cls is InternalError or not details:
        return InternalError(INTERNAL_MESSAGE.format(service=target))
    return cls(details)


def raised_by_a_service(error: grpc.RpcError) -> bool:
    """True when the status carries a domain error's message rather than the transport's own detail."""
    metadata = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    # grpc-stubs type a metadatum as an object with .key; at runtime it is a (key, value) tuple (a namedtuple
    # from a blocking call, a plain tuple in grpc.aio's Metadata), which only unpacking reads in both.
    pairs = cast(Iterable[tuple[str, str | bytes]], metadata or ())
    return any(key == DOMAIN_ERROR_KEY for key, _ in pairs)


class ErrorMappingInterceptor(aio.ServerInterceptor):
    """Server edge: domain errors become statuses with their code; anything else becomes INTERNAL."""

    def __init__(self, service: str) -> None:
        self._service = service

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_TRequest, _TResponse] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_TRequest, _TResponse] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        # Only Alexandria's own services raise domain errors; health and reflection are left as they are.
        if handler is None or not method.startswith(OWN_SERVICES_PREFIX):
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                # grpc-stubs type a handler's behaviour as blocking; under grpc.aio it is a coroutine function.
                self._wrap_unary(handler.unary_unary, method),  # type: ignore[arg-type]
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream, method),  # type: ignore[arg-type]  # as above
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                self._wrap_stream(handler.stream_stream, method),  # type: ignore[arg-type]  # as above
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    async def _abort(self, context: AnyContext, method: str, exc: BaseException) -> None:
        if isinstance(exc, AlexandriaError):
            log.info("%s -> %s: %s", method, exc.code.name, exc.message)
            await context.abort(exc.code, exc.message, trailing_metadata=((DOMAIN_ERROR_KEY, exc.code.name),))
        log.exception("unexpected error in %s", method, exc_info=exc)
        await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE.format(service=self._service))

    def _wrap_unary(self, behaviour: Callable[..., Awaitable[Any]], method: str) -> Callable[..., Awaitable[Any]]:
        async def wrapped(request: Any, context: AnyContext) -> Any:
            try:
                return await behaviour(request, context)
            except aio.AbortError:
                raise
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                await self._abort(context, method, exc)

        return wrapped

    def _wrap_stream(self, behaviour: Callable[..., AsyncIterator[Any]], method: str) -> Callable[..., AsyncIterator[Any]]:
        async def wrapped(request: Any, context: AnyContext) -> AsyncIterator[Any]:
            try:
                async for item in behaviour(request, context):
                    yield item
            except aio.AbortError:
                raise
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                await self._abort(context, method, exc)

        return wrapped
