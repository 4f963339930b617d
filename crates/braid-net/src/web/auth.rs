//! The dashboard's one access rule: with `[control] web_token` set, every request carries
//! the token, as `Authorization: Bearer TOKEN` (Prometheus' `authorization` setting) or
//! `?token=TOKEN` (a browser; the page passes it on to its own requests). Compared in
//! constant time, so the answer's timing does not reveal how much of a guess was right.

use axum::http::{header, HeaderMap, Uri};
use subtle::ConstantTimeEq;

/// Whether the request may see the dashboard.
pub fn authorized(token: Option<&str>, headers: &HeaderMap, uri: &Uri) -> bool {
    let Some(token) = token else {
        return true;
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| same(t.trim().as_bytes(), token.as_bytes()));
    let query = uri.query().map(|q| {
        form_urlencoded::parse(q.as_bytes())
            .filter(|(k, _)| k == "token")
            .any(|(_, v)| same(v.as_bytes(), token.as_bytes()))
    });
    bearer == Some(true) || query == Some(true)
}

/// Constant-time equality (the length alone may show).
fn same(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123456789abcdef0123456789abcdef";

    fn check(token: Option<&str>, auth: Option<&str>, uri: &str) -> bool {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        authorized(token, &h, &uri.parse().unwrap())
    }

    #[test]
    fn the_token_is_required_when_set() {
        assert!(check(None, None, "/metrics"));
        assert!(!check(Some(T), None, "/metrics"));
        assert!(check(Some(T), Some(&format!("Bearer {T}")), "/metrics"));
        assert!(!check(Some(T), Some(&format!("Bearer {T}x")), "/metrics"));
        assert!(!check(Some(T), Some(&format!("Basic {T}")), "/metrics"));
        assert!(check(Some(T), None, &format!("/api/status?x=1&token={T}")));
        assert!(!check(Some(T), None, "/api/status?token=0123456789abcdef"));
        assert!(!check(Some(T), None, "/?token="));
    }
}
