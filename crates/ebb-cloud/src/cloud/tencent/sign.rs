//! Tencent Cloud API 3.0's request signature, TC3-HMAC-SHA256, as "Signature v3" in Tencent
//! Cloud's API documentation describes it: a canonical request over the method, `/`, the
//! signed headers (`content-type` and `host`) and the body's SHA-256; a string to sign with the
//! timestamp and the credential scope `DATE/SERVICE/tc3_request`; a key derived from the secret
//! key by HMAC-SHA256 over the date, the service and `tc3_request`.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The algorithm's name, first in the `Authorization` header.
pub(super) const ALGORITHM: &str = "TC3-HMAC-SHA256";

/// The content type every request is sent and signed with.
pub(super) const CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// One POST request to sign: everything its signature covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Signed<'a> {
    /// The secret id, named in the credential.
    pub secret_id: &'a str,
    /// The secret key, never sent.
    pub secret_key: &'a str,
    /// The service, the first label of its host (`cvm`).
    pub service: &'a str,
    /// The `Host` header as sent.
    pub host: &'a str,
    /// `X-TC-Timestamp`: seconds since 1970, UTC.
    pub timestamp: i64,
    /// The JSON body, byte for byte as sent.
    pub body: &'a str,
}

/// Lower-case hex of the SHA-256 of `data`.
fn sha256_hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    // HMAC takes a key of any length: `new_from_slice` cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

impl Signed<'_> {
    /// The UTC date of the timestamp, `YYYY-MM-DD` (the credential scope's date).
    fn date(&self) -> String {
        chrono::DateTime::from_timestamp(self.timestamp, 0)
            .unwrap_or_default()
            .format("%Y-%m-%d")
            .to_string()
    }

    /// The canonical request (step 1).
    pub(super) fn canonical_request(&self) -> String {
        format!(
            "POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{}\n\ncontent-type;host\n{}",
            self.host.to_ascii_lowercase(),
            sha256_hex(self.body.as_bytes())
        )
    }

    /// The credential scope, `DATE/SERVICE/tc3_request`.
    fn scope(&self) -> String {
        format!("{}/{}/tc3_request", self.date(), self.service)
    }

    /// The string to sign (step 2).
    pub(super) fn string_to_sign(&self) -> String {
        format!(
            "{ALGORITHM}\n{}\n{}\n{}",
            self.timestamp,
            self.scope(),
            sha256_hex(self.canonical_request().as_bytes())
        )
    }

    /// The signature, lower-case hex (step 3).
    pub(super) fn signature(&self) -> String {
        let date = hmac(format!("TC3{}", self.secret_key).as_bytes(), &self.date());
        let service = hmac(&date, self.service);
        let signing = hmac(&service, "tc3_request");
        let signature = hmac(&signing, &self.string_to_sign());
        signature.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The `Authorization` header (step 4).
    pub(super) fn authorization(&self) -> String {
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders=content-type;host, Signature={}",
            self.secret_id,
            self.scope(),
            self.signature()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of Tencent Cloud's "Signature v3" page (API documentation, "Calling
    /// Method" → "Signature v3", https://www.tencentcloud.com/document/api/213/30654): CVM's
    /// DescribeInstances in ap-guangzhou at timestamp 1551113065 with the page's example keys.
    /// Every intermediate value and the header are the page's, byte for byte.
    const EXAMPLE_BODY: &str =
        r#"{"Limit": 1, "Filters": [{"Values": ["\u672a\u547d\u540d"], "Name": "instance-name"}]}"#;

    fn example() -> Signed<'static> {
        Signed {
            secret_id: "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE",
            secret_key: "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE",
            service: "cvm",
            host: "cvm.tencentcloudapi.com",
            timestamp: 1551113065,
            body: EXAMPLE_BODY,
        }
    }

    #[test]
    fn the_documented_example_is_reproduced_byte_for_byte() {
        let signed = example();
        assert_eq!(
            signed.canonical_request(),
            "POST\n/\n\ncontent-type:application/json; charset=utf-8\n\
             host:cvm.tencentcloudapi.com\n\ncontent-type;host\n\
             35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
        );
        assert_eq!(
            signed.string_to_sign(),
            "TC3-HMAC-SHA256\n1551113065\n2019-02-25/cvm/tc3_request\n\
             5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
        );
        assert_eq!(
            signed.authorization(),
            "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/\
             tc3_request, SignedHeaders=content-type;host, \
             Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
        );
    }

    /// The date is UTC's: 1551113065 is already 2019-02-26 in Beijing.
    #[test]
    fn the_scope_date_is_utc() {
        assert_eq!(example().date(), "2019-02-25");
        let next_day = Signed {
            timestamp: 1551113065 + 8 * 3600,
            ..example()
        };
        assert_eq!(next_day.date(), "2019-02-26");
    }

    #[test]
    fn a_changed_body_changes_the_signature() {
        let other = Signed {
            body: r#"{"Limit": 2}"#,
            ..example()
        };
        assert_ne!(other.signature(), example().signature());
    }
}
