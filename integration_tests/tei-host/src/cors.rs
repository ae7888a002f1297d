//! CORS as TEI's `--cors-allow-origin` sets it (tower-http's `CorsLayer` with methods GET and
//! POST and the `content-type` header): every answer carries `access-control-allow-origin` (`*`
//! when no origin is configured or `*` is among them, else the request's `Origin` when it is in the
//! list, nothing otherwise) and `vary` on the three request headers CORS reads; any `OPTIONS`
//! request is a preflight, answered 200 with the allowed methods and headers.
use hyper::header::{HeaderMap, HeaderValue, ORIGIN, VARY};
use hyper::{Body, Response, StatusCode};

const ALLOW_ORIGIN: &str = "access-control-allow-origin";
const ALLOW_METHODS: &str = "access-control-allow-methods";
const ALLOW_HEADERS: &str = "access-control-allow-headers";
const VARY_ON: &str = "origin, access-control-request-method, access-control-request-headers";

/// The configured origins: None (or one of them `*`) allows any.
pub fn allowed_origin(configured: Option<&[String]>, request: &HeaderMap) -> Option<HeaderValue> {
    match configured {
        None => Some(HeaderValue::from_static("*")),
        Some(list) if list.iter().any(|o| o == "*") => Some(HeaderValue::from_static("*")),
        Some(list) => {
            let origin = request.get(ORIGIN)?;
            list.iter().any(|o| o.as_bytes() == origin.as_bytes()).then(|| origin.clone())
        }
    }
}

/// Adds the headers every answer carries.
pub fn apply(origin: Option<HeaderValue>, response: &mut Response<Body>) {
    let h = response.headers_mut();
    if let Some(origin) = origin {
        h.insert(ALLOW_ORIGIN, origin);
    }
    h.append(VARY, HeaderValue::from_static(VARY_ON));
}

/// The answer to an `OPTIONS` request (a preflight).
pub fn preflight() -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(ALLOW_METHODS, HeaderValue::from_static("GET,POST"));
    h.insert(ALLOW_HEADERS, HeaderValue::from_static("content-type"));
    h.insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD, POST, OPTIONS"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_as_tei_allows_them() {
        let mut req = HeaderMap::new();
        assert_eq!(allowed_origin(None, &req).unwrap(), "*");
        let list = vec!["https://a.example".to_string()];
        assert_eq!(allowed_origin(Some(&list), &req), None);
        req.insert(ORIGIN, HeaderValue::from_static("https://b.example"));
        assert_eq!(allowed_origin(Some(&list), &req), None);
        req.insert(ORIGIN, HeaderValue::from_static("https://a.example"));
        assert_eq!(allowed_origin(Some(&list), &req).unwrap(), "https://a.example");
        assert_eq!(allowed_origin(Some(&["*".to_string()]), &req).unwrap(), "*");
    }
}
