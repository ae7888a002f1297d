//! HTTP's rules around the routes (routes.rs calls them): a head that framing.rs refused is
//! answered with its reason; after a stop every new request is 503 (and every answer closes its
//! connection); an `Expect` other than `100-continue` is 417 (hyper answers `100-continue`
//! itself); `OPTIONS` is a CORS preflight (cors.rs); a body must be JSON by its `Content-Type`
//! (415, as TEI's axum `Json` refuses it).
use std::sync::atomic::Ordering;

use hyper::header::{CONTENT_TYPE, EXPECT};
use hyper::{Body, Method, Request, Response};

use crate::errors::{ApiError, ErrorKind};
use crate::framing::{Refusal, REFUSAL_HEADER};
use crate::server::State;

fn refusal_kind(r: Refusal) -> ErrorKind {
    match r.status().as_u16() {
        414 => ErrorKind::UriTooLong,
        431 => ErrorKind::HeadTooLarge,
        501 => ErrorKind::NotImplemented,
        505 => ErrorKind::VersionNotSupported,
        _ => ErrorKind::BadRequest,
    }
}

/// What is answered before any route: `Err` an error, `Ok(Some)` an answer (a preflight),
/// `Ok(None)` on to the routes.
pub fn before_routes(state: &State, req: &Request<Body>) -> Result<Option<Response<Body>>, ApiError> {
    if let Some(code) = req.headers().get(REFUSAL_HEADER) {
        let r = Refusal::from_code(code.to_str().unwrap_or(""));
        return Err(ApiError::new(refusal_kind(r), r.message()));
    }
    if state.stopping.load(Ordering::SeqCst) {
        return Err(ApiError::new(
            ErrorKind::Unhealthy,
            "the server is shutting down: send the request again elsewhere",
        ));
    }
    for expect in req.headers().get_all(EXPECT) {
        if !expect.as_bytes().eq_ignore_ascii_case(b"100-continue") {
            let shown = String::from_utf8_lossy(expect.as_bytes()).into_owned();
            return Err(ApiError::new(
                ErrorKind::ExpectationFailed,
                format!("cannot meet `Expect: {shown}`: only 100-continue is supported"),
            ));
        }
    }
    if req.method() == Method::OPTIONS {
        return Ok(Some(crate::cors::preflight()));
    }
    Ok(None)
}

/// 415 unless the body is declared JSON (`application/json` or `application/*+json`, any
/// parameters), as axum's `Json` checks it.
pub fn json_content_type(req: &Request<Body>) -> Result<(), ApiError> {
    let declared = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let essence = declared.map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        Some(m) if m.starts_with("application/") && m.ends_with("+json") => Ok(()),
        _ => Err(ApiError::new(
            ErrorKind::UnsupportedMediaType,
            format!(
                "Expected request with `Content-Type: application/json`, got {}",
                declared.map_or("none".to_string(), |v| format!("`{v}`"))
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let with = |ct: Option<&str>| {
            let mut b = Request::builder();
            if let Some(ct) = ct {
                b = b.header(CONTENT_TYPE, ct);
            }
            json_content_type(&b.body(Body::empty()).unwrap()).map_err(|e| e.kind)
        };
        for ok in ["application/json", "Application/JSON; charset=utf-8", "application/vnd.api+json"] {
            assert_eq!(with(Some(ok)), Ok(()), "{ok}");
        }
        for bad in [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("json"), Some("")] {
            assert_eq!(with(bad), Err(ErrorKind::UnsupportedMediaType), "{bad:?}");
        }
    }
}
