//! Console logins and snooze-link uses, per client address: each checks a secret and does
//! database work, so each address has a budget of [`ATTEMPTS`] at once, refilled by as many
//! every [`REFILL`]. A person logs in or snoozes a few times a day; a script guessing tokens
//! or replaying links is held to a trickle and cannot make the database work for it.
//!
//! The client is the connection's peer. Behind proxies listed in `EBB_TRUSTED_PROXIES` (an
//! ingress, a load balancer), it is the last address in `X-Forwarded-For` that is not one of
//! them: what the outermost trusted proxy saw, which a client cannot forge, as it can the
//! entries to the left. Without the setting the header is ignored, and every client behind a
//! proxy shares the proxy's budget. An IPv6 client counts by its /64, which one host usually
//! holds whole.

use super::budgets::Buckets;
use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The attempts an address may make at once, and again each [`REFILL`].
pub const ATTEMPTS: u32 = 20;
/// How long an address's budget takes to refill from nothing.
pub const REFILL: Duration = Duration::from_secs(600);

/// The budgets of logins and snooze-link uses, one per client address.
#[derive(Debug)]
pub struct Attempts {
    buckets: Buckets<IpAddr>,
    trusted: Vec<IpNet>,
}

impl Default for Attempts {
    fn default() -> Self {
        Attempts::new(Vec::new())
    }
}

impl Attempts {
    /// Budgets per client, believing `X-Forwarded-For` from the proxies `trusted` only.
    pub fn new(trusted: Vec<IpNet>) -> Self {
        Attempts {
            buckets: Buckets::refilled(ATTEMPTS, REFILL),
            trusted,
        }
    }

    /// Takes one attempt from the budget of the client of a request that came from `peer`
    /// (`None`: not over a connection, as in-process; such requests share one budget) with
    /// `headers`; when it is spent, how long until one is back.
    pub fn take(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Result<(), Duration> {
        self.buckets.take(&self.client(peer, headers))
    }

    /// The address a request's budget is kept under.
    fn client(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> IpAddr {
        let Some(peer) = peer else {
            return IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        };
        let mut client = peer.ip().to_canonical();
        if self.trusts(client) {
            let forwarded: Vec<&str> = headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .collect();
            for hop in forwarded.into_iter().rev() {
                let Some(address) = address(hop) else { break };
                client = address;
                if !self.trusts(client) {
                    break;
                }
            }
        }
        by_host(client)
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&address))
    }
}

/// An entry of `X-Forwarded-For`: an address, with a port or not.
fn address(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .or_else(|_| hop.parse::<SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|a| a.to_canonical())
}

/// An IPv6 address's /64; an IPv4 address as it is.
fn by_host(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
    }
}

/// A trusted proxy of `EBB_TRUSTED_PROXIES`: a network (`10.0.0.0/8`) or one address.
pub fn trusted_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("`{text}` is neither an address nor a network such as 10.0.0.0/8 or fd00::/8")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn peer(s: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(s.parse().unwrap(), 40_000))
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_client_is_the_peer_unless_a_trusted_proxy_forwarded_it() {
        let none = Attempts::default();
        let header = forwarded(&["203.0.113.7"]);
        assert_eq!(none.client(peer("10.0.0.5"), &header), ip("10.0.0.5"));
        let ingress = Attempts::new(vec![trusted_proxy("10.0.0.0/8").unwrap()]);
        assert_eq!(ingress.client(peer("10.0.0.5"), &header), ip("203.0.113.7"));
        // A peer that is not trusted cannot name another client.
        assert_eq!(
            ingress.client(peer("198.51.100.1"), &header),
            ip("198.51.100.1")
        );
        // The entries a client wrote itself are left of what the proxy appended.
        let spoofed = forwarded(&["192.0.2.1, 203.0.113.7"]);
        assert_eq!(
            ingress.client(peer("10.0.0.5"), &spoofed),
            ip("203.0.113.7")
        );
        // Through two trusted proxies, over two header lines, with a port.
        let chained = forwarded(&["192.0.2.1, 203.0.113.7:5000", "10.1.2.3"]);
        assert_eq!(
            ingress.client(peer("10.0.0.5"), &chained),
            ip("203.0.113.7")
        );
        // Garbage stops the walk at the last trusted hop.
        let garbage = forwarded(&["203.0.113.7, not-an-address"]);
        assert_eq!(ingress.client(peer("10.0.0.5"), &garbage), ip("10.0.0.5"));
        // IPv4 mapped into IPv6 is the IPv4 address; IPv6 counts by its /64.
        assert_eq!(
            none.client(peer("::ffff:192.0.2.9"), &HeaderMap::new()),
            ip("192.0.2.9")
        );
        assert_eq!(
            none.client(peer("2001:db8:1:2:aaaa::1"), &HeaderMap::new()),
            ip("2001:db8:1:2::")
        );
        assert_eq!(none.client(None, &HeaderMap::new()), ip("::"));
    }

    #[tokio::test(start_paused = true)]
    async fn each_address_has_its_budget_and_it_comes_back() {
        let attempts = Attempts::default();
        let none = HeaderMap::new();
        for _ in 0..ATTEMPTS {
            assert_eq!(attempts.take(peer("192.0.2.1"), &none), Ok(()));
        }
        let wait = attempts.take(peer("192.0.2.1"), &none).unwrap_err();
        assert_eq!(wait, REFILL / ATTEMPTS);
        assert_eq!(attempts.take(peer("192.0.2.2"), &none), Ok(()));
        tokio::time::advance(wait).await;
        assert_eq!(attempts.take(peer("192.0.2.1"), &none), Ok(()));
        assert!(attempts.take(peer("192.0.2.1"), &none).is_err());
    }

    #[test]
    fn trusted_proxies_are_networks_or_addresses() {
        assert_eq!(
            trusted_proxy("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            trusted_proxy(" 10.1.2.3 ").unwrap().to_string(),
            "10.1.2.3/32"
        );
        assert_eq!(trusted_proxy("fd00::/8").unwrap().to_string(), "fd00::/8");
        let err = trusted_proxy("ingress").unwrap_err();
        assert!(err.contains("`ingress` is neither"), "{err}");
    }
}
