//! The host's errors as text-embeddings-inference (TEI) returns them: a status code and a JSON body
//! `{"error": message, "error_type": kind}` on TEI's routes, `{"message", "code", "type"}` on the
//! OpenAI route. The codes (docs/tei-host.md, "Errors"): 400 empty batch, 413 too many inputs or
//! tokens (and bodies over the payload limit), 422 validation (malformed JSON, wrong types, token
//! ids past the vocabulary, empty sequences) and tokenizer errors, 424 a backend failure, 429 the
//! queue or the concurrency limit full, 503 while loading, stopping or after the backend stopped;
//! and HTTP's own: 400 a request whose framing is wrong, 404 an unknown OpenAI `model`, 414, 415,
//! 417, 431, 501, 505.
use hyper::StatusCode;
use serde_json::json;

/// TEI's `ErrorType`, the `error_type` of a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 413: too many inputs, too many tokens, a body over the payload limit.
    TooLarge,
    /// 422: the request is well formed HTTP but not a valid request.
    Validation,
    /// 422: the tokenizer refused the text.
    Tokenizer,
    /// 400: no inputs at all.
    Empty,
    /// 424: the model failed on a batch (the library's message).
    Backend,
    /// 429: the queue or the concurrency limit is full.
    Overloaded,
    /// 503: loading, or the backend is gone.
    Unhealthy,
    /// 408: the body did not arrive in time (slow clients).
    Timeout,
    /// 404 / 405: no such route.
    NotFound,
    MethodNotAllowed,
    /// 404 on the OpenAI route: `model` names a model this server does not serve (OpenAI's code).
    ModelNotFound,
    /// 400: the HTTP request itself is wrong (its framing, a malformed chunk, the body cut off).
    BadRequest,
    /// 415: a body that is not `Content-Type: application/json`.
    UnsupportedMediaType,
    /// 417: an `Expect` other than `100-continue`.
    ExpectationFailed,
    /// 414, 431, 501, 505: a request line, head or framing this server does not take.
    UriTooLong,
    HeadTooLarge,
    NotImplemented,
    VersionNotSupported,
}

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Validation | ErrorKind::Tokenizer => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Empty => StatusCode::BAD_REQUEST,
            ErrorKind::Backend => StatusCode::FAILED_DEPENDENCY,
            ErrorKind::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Unhealthy => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Timeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::ModelNotFound => StatusCode::NOT_FOUND,
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::ExpectationFailed => StatusCode::EXPECTATION_FAILED,
            ErrorKind::UriTooLong => StatusCode::URI_TOO_LONG,
            ErrorKind::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorKind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::VersionNotSupported => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
        }
    }

    /// The `error_type` string (TEI's names; 413 is TEI's "validation").
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::TooLarge | ErrorKind::Validation => "validation",
            ErrorKind::Tokenizer => "tokenizer",
            ErrorKind::Empty => "empty",
            ErrorKind::Backend => "backend",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::Unhealthy => "unhealthy",
            ErrorKind::Timeout => "timeout",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::ModelNotFound => "model_not_found",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::UnsupportedMediaType => "unsupported_media_type",
            ErrorKind::ExpectationFailed => "expectation_failed",
            ErrorKind::UriTooLong => "uri_too_long",
            ErrorKind::HeadTooLarge => "header_too_large",
            ErrorKind::NotImplemented => "not_implemented",
            ErrorKind::VersionNotSupported => "version_not_supported",
        }
    }

    /// Whether the connection cannot carry another request after this answer (the body was not
    /// read, or the framing is not to be trusted).
    pub fn closes(self) -> bool {
        matches!(
            self,
            ErrorKind::TooLarge
                | ErrorKind::Timeout
                | ErrorKind::BadRequest
                | ErrorKind::UriTooLong
                | ErrorKind::HeadTooLarge
                | ErrorKind::NotImplemented
                | ErrorKind::VersionNotSupported
                | ErrorKind::ExpectationFailed
                | ErrorKind::UnsupportedMediaType
        )
    }

    /// The `err` label of `te_request_failure`.
    pub fn metric_label(self) -> &'static str {
        match self {
            ErrorKind::TooLarge => "batch_size",
            ErrorKind::Validation | ErrorKind::Empty | ErrorKind::Timeout => "validation",
            ErrorKind::Tokenizer => "tokenization",
            ErrorKind::Backend => "inference",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::Unhealthy => "unhealthy",
            ErrorKind::NotFound | ErrorKind::MethodNotAllowed | ErrorKind::ModelNotFound => "route",
            ErrorKind::BadRequest
            | ErrorKind::UnsupportedMediaType
            | ErrorKind::ExpectationFailed
            | ErrorKind::UriTooLong
            | ErrorKind::HeadTooLarge
            | ErrorKind::NotImplemented
            | ErrorKind::VersionNotSupported => "protocol",
        }
    }
}

/// An error answer: its kind and a message saying what was wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, message: message.into() }
    }

    pub fn validation(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Validation, message)
    }

    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::TooLarge, message)
    }

    pub fn overloaded(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Overloaded, message)
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// TEI's body.
    pub fn tei_body(&self) -> serde_json::Value {
        json!({ "error": self.message, "error_type": self.kind.name() })
    }

    /// The OpenAI route's body (TEI's `OpenAICompatErrorResponse`).
    pub fn openai_body(&self) -> serde_json::Value {
        json!({ "message": self.message, "code": self.status().as_u16(), "type": self.kind.name() })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.status().as_u16(), self.kind.name(), self.message)
    }
}
