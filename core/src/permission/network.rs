//! The network setting applied to a destination address.
//!
//! Under `remote` nothing on this machine is reachable: loopback, the unspecified address, any
//! address one of its interfaces holds, and the link-local ranges (169.254.0.0/16 and fe80::/10, where
//! cloud metadata services answer), unless the policy names the address in `allow_local_addresses`.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::str::FromStr;

use super::Network;

/// An address or a CIDR range (`169.254.169.254`, `169.254.0.0/16`, `fe80::/10`) a policy lets through
/// under network `remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrRange {
    base: IpAddr,
    prefix: u8,
}

impl AddrRange {
    /// Whether `ip` lies in the range (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.base, canonical(ip)) {
            (IpAddr::V4(base), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(base) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(base), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(base) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for AddrRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let base = IpAddr::from_str(addr.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|_| format!("'{s}' is not an IP address or a CIDR range"))?;
        let base = canonical(base);
        let max = if base.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("'{s}' has a prefix length that is not a number from 0 to {max}"))?,
        };
        Ok(AddrRange { base, prefix })
    }
}

impl std::fmt::Display for AddrRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Whether `ip` is link-local: 169.254.0.0/16 or fe80::/10 (where cloud metadata services answer).
pub fn is_link_local(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Whether `ip` is this machine: loopback, unspecified, or an address one of its interfaces holds
/// (a socket can be bound to it).
pub fn is_this_host(ip: IpAddr) -> bool {
    let ip = canonical(ip);
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Why a destination is refused under `network`, or `None` when it is allowed. Under `remote`,
/// `allowed` names local or link-local addresses the policy lets through.
pub fn refusal(network: Network, ip: IpAddr, allowed: &[AddrRange]) -> Option<String> {
    match network {
        Network::Unrestricted => None,
        Network::None => Some("the network is off for this session (network: none)".into()),
        Network::Remote if allowed.iter().any(|r| r.contains(ip)) => None,
        Network::Remote if is_link_local(ip) => Some(format!(
            "{ip} is link-local (where cloud metadata services answer), which is not reachable under network: remote"
        )),
        Network::Remote if is_this_host(ip) => {
            Some(format!("{ip} is this machine, which is not reachable under network: remote"))
        }
        Network::Remote => None,
    }
}

/// Reads a policy's `allow_local_addresses`; an entry that is not an address or range is an error
/// naming it.
pub fn parse_ranges(entries: &[String]) -> Result<Vec<AddrRange>, String> {
    entries.iter().map(|e| e.parse::<AddrRange>().map_err(|why| format!("allow_local_addresses: {why}"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &[&str]) -> Vec<AddrRange> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn remote_refuses_this_machine_only() {
        for local in ["127.0.0.1", "127.8.9.10", "::1", "0.0.0.0", "::ffff:127.0.0.1"] {
            assert!(refusal(Network::Remote, local.parse().unwrap(), &[]).is_some(), "{local}");
        }
        assert!(refusal(Network::Remote, "192.0.2.7".parse().unwrap(), &[]).is_none());
        assert!(refusal(Network::None, "192.0.2.7".parse().unwrap(), &[]).is_some());
        assert!(refusal(Network::Unrestricted, "127.0.0.1".parse().unwrap(), &[]).is_none());
    }

    #[test]
    fn remote_refuses_link_local_unless_the_policy_names_it() {
        for ll in ["169.254.169.254", "169.254.0.1", "fe80::1", "febf::1", "::ffff:169.254.169.254"] {
            let why = refusal(Network::Remote, ll.parse().unwrap(), &[]).unwrap_or_default();
            assert!(why.contains("link-local"), "{ll}: {why}");
        }
        // Control: just outside the ranges is a remote address.
        for remote in ["169.255.0.1", "169.253.255.255", "fec0::1", "fe7f::1"] {
            assert!(refusal(Network::Remote, remote.parse().unwrap(), &[]).is_none(), "{remote}");
        }
        let allowed = ranges(&["169.254.169.254", "fe80::/64"]);
        assert!(refusal(Network::Remote, "169.254.169.254".parse().unwrap(), &allowed).is_none());
        assert!(refusal(Network::Remote, "::ffff:169.254.169.254".parse().unwrap(), &allowed).is_none());
        assert!(refusal(Network::Remote, "169.254.169.253".parse().unwrap(), &allowed).is_some());
        assert!(refusal(Network::Remote, "fe80::abcd".parse().unwrap(), &allowed).is_none());
        assert!(refusal(Network::Remote, "fe80:0:0:1::1".parse().unwrap(), &allowed).is_some());
        // Naming an address never opens network none.
        assert!(refusal(Network::None, "169.254.169.254".parse().unwrap(), &allowed).is_some());
    }

    #[test]
    fn ranges_parse_or_name_the_bad_entry() {
        assert_eq!(ranges(&["10.0.0.0/8"])[0].to_string(), "10.0.0.0/8");
        assert!(ranges(&["0.0.0.0/0"])[0].contains("8.8.8.8".parse().unwrap()));
        for bad in ["", "localhost", "169.254.0.0/33", "fe80::/129", "1.2.3.4/x"] {
            let e = parse_ranges(&[bad.to_string()]).unwrap_err();
            assert!(e.starts_with("allow_local_addresses: '") && e.contains(bad), "{bad}: {e}");
        }
    }
}
