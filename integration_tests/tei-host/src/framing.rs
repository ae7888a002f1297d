//! Request framing as the bytes arrive, before hyper reads them (framed_io.rs feeds it): where each
//! request's head ends (httparse, as hyper parses it), how long its body is (Content-Length, or
//! chunked, followed chunk by chunk with hyper's grammar), and the heads to refuse instead of
//! passing on. hyper 0.14.19 takes a request with both `Content-Length` and `Transfer-Encoding:
//! chunked` as chunked and keeps the connection (and drops the `Content-Length` header when it
//! comes second, so a route cannot see it): RFC 9112 §6.3 asks to refuse it and close, or a proxy
//! in front that framed by the length smuggles the rest in. Every refusal here is answered by the
//! routes (errors.rs) and ends the connection.
use hyper::StatusCode;

/// Longest head accepted (request line and headers); hyper's own buffer goes to ~400 KB.
pub const MAX_HEAD: usize = 128 * 1024;
/// Longest request target (hyper's `MAX_URI_LEN`).
const MAX_URI: usize = 65534;
/// hyper parses at most this many headers.
const MAX_HEADERS: usize = 100;
/// The header the synthetic head of a refusal carries; a client that sends it is refused too.
pub const REFUSAL_HEADER: &str = "x-tei-host-refused";

/// Why a request was refused before hyper saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Content-Length and Transfer-Encoding together (RFC 9112 §6.3).
    LengthAndChunked,
    /// A transfer coding other than a single `chunked` (RFC 9112 §6.1: 501).
    TransferCoding,
    /// Transfer-Encoding on an HTTP/1.0 request.
    ChunkedHttp10,
    /// A Content-Length that is not one decimal number, or several that differ.
    BadLength,
    /// The head does not parse (httparse's reason is in the message).
    BadHead(&'static str),
    /// No complete head within `MAX_HEAD` bytes.
    HeadTooLarge,
    UriTooLong,
    BadUri,
    /// Not HTTP/1.0 or 1.1 (an HTTP/2 preface, TLS, ...).
    Version,
    /// The client sent `REFUSAL_HEADER` itself.
    Reserved,
    /// An HTTP/1.1 request without one `Host` (RFC 9112 §3.2: 400).
    Host,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::TransferCoding => StatusCode::NOT_IMPLEMENTED,
            Refusal::HeadTooLarge | Refusal::BadHead("too many headers") => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::UriTooLong => StatusCode::URI_TOO_LONG,
            Refusal::Version => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    pub fn message(self) -> String {
        match self {
            Refusal::LengthAndChunked => {
                "the request has both Content-Length and Transfer-Encoding: its length is ambiguous (RFC 9112 6.3); \
                 the connection is closed"
                    .into()
            }
            Refusal::TransferCoding => "Transfer-Encoding other than a single `chunked` is not supported".into(),
            Refusal::ChunkedHttp10 => "Transfer-Encoding is not allowed on an HTTP/1.0 request".into(),
            Refusal::BadLength => "Content-Length must be one decimal number (repeated ones must agree)".into(),
            Refusal::BadHead(why) => format!("malformed request head: {why}"),
            Refusal::HeadTooLarge => format!("the request head is larger than {MAX_HEAD} bytes"),
            Refusal::UriTooLong => format!("the request target is longer than {MAX_URI} bytes"),
            Refusal::BadUri => "the request target is not a valid URI".into(),
            Refusal::Version => "only HTTP/1.0 and HTTP/1.1 are served".into(),
            Refusal::Reserved => format!("the header {REFUSAL_HEADER} is reserved"),
            Refusal::Host => "an HTTP/1.1 request needs exactly one Host header".into(),
        }
    }

    /// The token the synthetic head carries, and back.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::LengthAndChunked => "cl-te",
            Refusal::TransferCoding => "te",
            Refusal::ChunkedHttp10 => "te-http10",
            Refusal::BadLength => "cl",
            Refusal::BadHead(why) => why,
            Refusal::HeadTooLarge => "head-too-large",
            Refusal::UriTooLong => "uri-too-long",
            Refusal::BadUri => "uri",
            Refusal::Version => "version",
            Refusal::Reserved => "reserved",
            Refusal::Host => "host",
        }
    }

    pub fn from_code(code: &str) -> Refusal {
        let fixed = [
            Refusal::LengthAndChunked,
            Refusal::TransferCoding,
            Refusal::ChunkedHttp10,
            Refusal::BadLength,
            Refusal::HeadTooLarge,
            Refusal::UriTooLong,
            Refusal::BadUri,
            Refusal::Version,
            Refusal::Reserved,
            Refusal::Host,
        ];
        fixed.into_iter().find(|r| r.code() == code).unwrap_or_else(|| Refusal::BadHead(head_error_text(code)))
    }

    /// The head hyper is given instead of the refused one (no body; nothing follows it).
    pub fn synthetic_head(self) -> Vec<u8> {
        format!("GET / HTTP/1.1\r\n{REFUSAL_HEADER}: {}\r\n\r\n", self.code()).into_bytes()
    }
}

/// httparse's reasons, as static text (they travel as the refusal's code).
const HEAD_ERRORS: [&str; 5] =
    ["invalid header name", "invalid header value", "invalid new line", "invalid token", "too many headers"];

fn head_error_text(code: &str) -> &'static str {
    HEAD_ERRORS.iter().copied().find(|e| *e == code).unwrap_or("unparsable")
}

/// httparse's error as a refusal: a version error is 505 only where the request line is three
/// words ending in `HTTP/...` (else the line is malformed: a space in the target, HTTP/0.9).
fn head_error(e: httparse::Error, buf: &[u8]) -> Refusal {
    let line = buf.split(|&b| b == b'\n').find(|l| !l.is_empty() && *l != b"\r").unwrap_or(&[]);
    let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let text = match e {
        httparse::Error::HeaderName => HEAD_ERRORS[0],
        httparse::Error::HeaderValue => HEAD_ERRORS[1],
        httparse::Error::NewLine => HEAD_ERRORS[2],
        httparse::Error::Version if words.len() == 3 && words[2].starts_with(b"HTTP/") => return Refusal::Version,
        httparse::Error::TooManyHeaders => HEAD_ERRORS[4],
        _ => HEAD_ERRORS[3],
    };
    Refusal::BadHead(text)
}

/// How the body after a head is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Length(u64),
    Chunked,
}

/// Checks a complete head: its body's framing, or why it is refused.
fn inspect(req: &httparse::Request<'_, '_>) -> Result<Body, Refusal> {
    let path = req.path.unwrap_or("");
    if path.len() > MAX_URI {
        return Err(Refusal::UriTooLong);
    }
    if path.parse::<hyper::Uri>().is_err() {
        return Err(Refusal::BadUri);
    }
    let (mut lengths, mut codings, mut hosts) = (Vec::new(), Vec::new(), 0);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case(REFUSAL_HEADER) {
            return Err(Refusal::Reserved);
        }
        if h.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            lengths.push(h.value);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let v = std::str::from_utf8(h.value).map_err(|_| Refusal::TransferCoding)?;
            codings.extend(v.split(',').map(|c| c.trim().to_ascii_lowercase()));
        }
    }
    if req.version == Some(1) && hosts != 1 {
        return Err(Refusal::Host);
    }
    match (lengths.is_empty(), codings.is_empty()) {
        (true, true) => Ok(Body::Length(0)),
        (false, false) => Err(Refusal::LengthAndChunked),
        (true, false) if req.version == Some(0) => Err(Refusal::ChunkedHttp10),
        (true, false) if codings == ["chunked"] => Ok(Body::Chunked),
        (true, false) => Err(Refusal::TransferCoding),
        (false, true) => {
            let parse = |v: &[u8]| {
                (!v.is_empty() && v.len() <= 19 && v.iter().all(u8::is_ascii_digit))
                    .then(|| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                    .flatten()
            };
            let first = parse(lengths[0]).ok_or(Refusal::BadLength)?;
            if lengths.iter().any(|v| parse(v) != Some(first)) {
                return Err(Refusal::BadLength);
            }
            Ok(Body::Length(first))
        }
    }
}

/// What a head parse gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Head {
    /// Not complete yet.
    Partial,
    /// `len` bytes of head of an HTTP/1.`minor` request, then a body framed as said.
    Complete {
        len: usize,
        body: Body,
        minor: u8,
    },
    Refused(Refusal),
}

/// Parses the head at the start of `buf`, as hyper will.
pub fn parse_head(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => Head::Refused(Refusal::HeadTooLarge),
        Ok(httparse::Status::Partial) => Head::Partial,
        Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => Head::Refused(Refusal::HeadTooLarge),
        Ok(httparse::Status::Complete(len)) => match inspect(&req) {
            Ok(body) => Head::Complete { len, body, minor: req.version.unwrap_or(1) },
            Err(r) => Head::Refused(r),
        },
        Err(e) => Head::Refused(head_error(e, buf)),
    }
}

/// Where a chunked body's reader stands (hyper 0.14's `ChunkedState`, the same grammar: a hex
/// size, optional spaces and `;extensions`, CRLF, the data, CRLF; after the 0 chunk, trailer
/// lines up to an empty one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Size { size: u64 },
    SizeLws { size: u64 },
    Extension { size: u64 },
    SizeLf { size: u64 },
    Data(u64),
    DataCr,
    DataLf,
    Trailer,
    TrailerLf,
    EndCr,
    EndLf,
}

/// Follows a chunked body byte by byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkReader(Chunk);

/// What [`ChunkReader::advance`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// All of the input belongs to the body; more is to come.
    More,
    /// The body ends after `n` bytes of the input.
    End(usize),
    /// The framing is broken at byte `n` of the input (hyper fails there too).
    Broken(usize),
}

impl Default for ChunkReader {
    fn default() -> Self {
        ChunkReader(Chunk::Size { size: 0 })
    }
}

impl ChunkReader {
    pub fn advance(&mut self, input: &[u8]) -> Step {
        let mut i = 0;
        while i < input.len() {
            if let Chunk::Data(rem) = self.0 {
                let take = rem.min((input.len() - i) as u64);
                i += take as usize;
                self.0 = if take == rem { Chunk::DataCr } else { Chunk::Data(rem - take) };
                continue;
            }
            let b = input[i];
            i += 1;
            self.0 = match (self.0, b) {
                (Chunk::Size { size }, b) if b.is_ascii_hexdigit() => {
                    let digit = (b as char).to_digit(16).expect("hex") as u64;
                    match size.checked_mul(16).and_then(|s| s.checked_add(digit)) {
                        Some(size) => Chunk::Size { size },
                        None => return Step::Broken(i - 1),
                    }
                }
                (Chunk::Size { size } | Chunk::SizeLws { size }, b'\t' | b' ') => Chunk::SizeLws { size },
                (Chunk::Size { size } | Chunk::SizeLws { size }, b';') => Chunk::Extension { size },
                (Chunk::Size { size } | Chunk::SizeLws { size } | Chunk::Extension { size }, b'\r') => {
                    Chunk::SizeLf { size }
                }
                (Chunk::Extension { .. }, b'\n') => return Step::Broken(i - 1),
                (Chunk::Extension { size }, _) => Chunk::Extension { size },
                (Chunk::SizeLf { size: 0 }, b'\n') => Chunk::EndCr,
                (Chunk::SizeLf { size }, b'\n') => Chunk::Data(size),
                (Chunk::DataCr, b'\r') => Chunk::DataLf,
                (Chunk::DataLf, b'\n') => Chunk::Size { size: 0 },
                (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
                (Chunk::Trailer, _) => Chunk::Trailer,
                (Chunk::TrailerLf, b'\n') => Chunk::EndCr,
                (Chunk::EndCr, b'\r') => Chunk::EndLf,
                (Chunk::EndCr, _) => Chunk::Trailer,
                (Chunk::EndLf, b'\n') => {
                    *self = ChunkReader::default();
                    return Step::End(i);
                }
                _ => return Step::Broken(i - 1),
            };
        }
        Step::More
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Head {
        parse_head(raw.as_bytes())
    }

    #[test]
    fn heads_and_their_bodies() {
        let get = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(head(get), Head::Complete { len: get.len(), body: Body::Length(0), minor: 1 });
        assert_eq!(head("GET /health HTTP/1.1\r\nHost: a\r\n"), Head::Partial);
        let post = "POST /embed HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\ncontent-length: 12\r\n\r\n";
        assert_eq!(head(post), Head::Complete { len: post.len(), body: Body::Length(12), minor: 1 });
        let chunked = "POST /embed HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n";
        assert_eq!(head(chunked), Head::Complete { len: chunked.len(), body: Body::Chunked, minor: 1 });
        for (raw, why) in [
            (
                "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                Refusal::LengthAndChunked,
            ),
            (
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
                Refusal::LengthAndChunked,
            ),
            ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Refusal::TransferCoding),
            (
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                Refusal::TransferCoding,
            ),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Refusal::ChunkedHttp10),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", Refusal::BadLength),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", Refusal::BadLength),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", Refusal::BadLength),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", Refusal::BadLength),
            ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Refusal::Version),
            ("GET / HTTP/1.1\r\nX Y: z\r\n\r\n", Refusal::BadHead("invalid header name")),
            ("GET / HTTP/1.1\r\nHost: a\r\nx-tei-host-refused: cl-te\r\n\r\n", Refusal::Reserved),
            ("GET / HTTP/1.1\r\n\r\n", Refusal::Host),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Refusal::Host),
        ] {
            assert_eq!(head(raw), Head::Refused(why), "{raw:?}");
            assert_eq!(Refusal::from_code(why.code()), why, "{raw:?}");
        }
        let huge = format!("GET / HTTP/1.1\r\nX-A: {}", "a".repeat(MAX_HEAD));
        assert_eq!(
            head(&format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(70_000))),
            Head::Refused(Refusal::UriTooLong)
        );
        let many: String = (0..101).map(|i| format!("X-{i}: a\r\n")).collect();
        let too_many = head(&format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n"));
        assert_eq!(too_many, Head::Refused(Refusal::BadHead("too many headers")));
        assert_eq!(head(&huge), Head::Refused(Refusal::HeadTooLarge));
    }

    #[test]
    fn chunked_bodies_end_where_hyper_ends_them() {
        let body = b"5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\nGET /next";
        let mut r = ChunkReader::default();
        assert_eq!(r.advance(body), Step::End(body.len() - 9));
        // Byte by byte: the same end.
        let mut r = ChunkReader::default();
        let ends: Vec<usize> = (0..body.len()).filter(|&i| r.advance(&body[i..=i]) == Step::End(1)).collect();
        assert_eq!(ends, [body.len() - 10]);
        for (bad, at) in
            [("Z\r\n", 0), ("5\r\nhelloX", 8), ("1;a\nb", 3), ("1 2\r\n", 2), ("fffffffffffffffff\r\n", 16)]
        {
            assert_eq!(ChunkReader::default().advance(bad.as_bytes()), Step::Broken(at), "{bad:?}");
        }
        assert_eq!(ChunkReader::default().advance(b"10\r\nabc"), Step::More);
    }
}
