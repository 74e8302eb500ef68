//! Credentials out of text that people read. A URL may carry a user and password
//! (`https://user:secret@prometheus.example`); error messages quote URLs, and those messages
//! become decision reasons, audit rows, `/v1/instances`, `/v1/status` and log lines. A cloud's
//! error message may also quote an access key, a signed URL, a token or an account id:
//! [`redact_secrets`] takes those out of every text ebb stores.

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

/// `text` with everything secret-looking replaced by `***`: a URL's user information and its
/// query string (a presigned URL's signature and credential are there), AWS access key ids
/// (`AKIA...`, `ASIA...`), 12-digit account ids, and any run of 40 or more token characters
/// that is not plain hexadecimal (secret keys, session tokens, bearer tokens, EC2's encoded
/// authorization messages; a hash or commit id, which is no secret, stays). What is kept is
/// the summary: the operation, the error's code and the words around them.
pub fn redact_secrets(text: &str) -> String {
    let text = redact_queries(&redact_userinfo(text));
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    for c in text.chars() {
        if is_token_char(c) {
            word.push(c);
            continue;
        }
        out.push_str(shown_word(&word));
        word.clear();
        out.push(c);
    }
    out.push_str(shown_word(&word));
    out
}

/// Characters of keys, tokens and base64: a run of them is one word to judge.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-' | '%')
}

/// `word`, or `***` when it looks secret.
fn shown_word(word: &str) -> &str {
    let access_key = word.len() == 20
        && ["AKIA", "ASIA", "AIDA", "AROA", "ANPA"]
            .iter()
            .any(|p| word.starts_with(p))
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    let account = word.len() == 12 && word.chars().all(|c| c.is_ascii_digit());
    let token = word.len() >= 40 && !word.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if access_key || account || token {
        HIDDEN
    } else {
        word
    }
}

/// `text` with the query string of every URL in it replaced by `***`.
fn redact_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| matches!(c, '"' | '\'' | '<' | '>' | '`') || c.is_whitespace())
            .unwrap_or(after.len());
        let url = &after[..end];
        match url.find('?') {
            Some(q) => {
                out.push_str(&url[..=q]);
                out.push_str(HIDDEN);
            }
            None => out.push_str(url),
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
    fn keys_tokens_signed_urls_and_account_ids_are_hidden_the_summary_stays() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6m7oRw0uxOw";
        let text = format!(
            "StopInstances failed: UnauthorizedOperation: User arn:aws:sts::123456789012:assumed-role/ebb/i-0abc is not authorized; key {key}, secret {secret}, token={token}, see https://bucket.s3.amazonaws.com/key?X-Amz-Signature=abc&X-Amz-Credential={key} (request id 3f1c8e4a-52b1-4d2e-9c1f-0a1b2c3d4e5f)"
        );
        let shown = redact_secrets(&text);
        for secret in [key, secret, token, "123456789012", "X-Amz-Signature"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert_eq!(
            shown,
            "StopInstances failed: UnauthorizedOperation: User arn:aws:sts::***:assumed-role/ebb/i-0abc is not authorized; key ***, secret ***, ***, see https://bucket.s3.amazonaws.com/key?*** (request id 3f1c8e4a-52b1-4d2e-9c1f-0a1b2c3d4e5f)"
        );
    }

    #[test]
    fn ids_hashes_and_plain_words_are_not_secrets() {
        for text in [
            "i-0123456789abcdef0 snap-0123456789abcdef0 ami-0123456789abcdef0",
            "policy version 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "InsufficientInstanceCapacity: There is no capacity available that matches your request.",
            "https://prometheus.example:9090/api/v1/query_range timed out",
        ] {
            assert_eq!(redact_secrets(text), text);
        }
    }

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
