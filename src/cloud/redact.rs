//! Credentials out of text that people read. A URL may carry a user and password
//! (`https://user:secret@prometheus.example`); error messages quote URLs, and those messages
//! become decision reasons, audit rows, `/v1/instances`, `/v1/status` and log lines.

/// What stands in for a URL's user information.
const HIDDEN: &str = "***";

/// `text` with the user information of every URL in it (`user:password@`, `token@`) replaced
/// by `***`: `https://***@prometheus.example/api`. Text without a URL is returned unchanged.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends where the path, query or fragment begins, or the URL does.
        let end = after
            .find(|c: char| {
                matches!(
                    c,
                    '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`' | ')' | ']'
                ) || c.is_whitespace()
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(sign) => {
                out.push_str(HIDDEN);
                out.push_str(&authority[sign..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_user_and_password_are_hidden_wherever_it_is_quoted() {
        for (text, shown) in [
            (
                "cannot reach https://ebb:s3cr3t@prometheus.example:9090/api/v1/query_range: timed out",
                "cannot reach https://***@prometheus.example:9090/api/v1/query_range: timed out",
            ),
            ("http://token@host", "http://***@host"),
            ("(url: \"http://a:b@h/x\")", "(url: \"http://***@h/x\")"),
            (
                "two: http://a:b@one/ and https://c@two?q=d@e",
                "two: http://***@one/ and https://***@two?q=d@e",
            ),
            ("p@ss in http://a:p@ss@host/", "p@ss in http://***@host/"),
            ("no url, mail@example.com", "no url, mail@example.com"),
            ("http://host/path@x", "http://host/path@x"),
            ("ends in ://", "ends in ://"),
            ("", ""),
        ] {
            assert_eq!(redact_userinfo(text), shown, "{text}");
        }
    }
}
