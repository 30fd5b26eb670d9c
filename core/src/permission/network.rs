//! The network setting applied to a destination address.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use super::Network;

/// Whether `ip` is this machine: loopback, unspecified, or an address one of its interfaces holds
/// (a socket can be bound to it).
pub fn is_this_host(ip: IpAddr) -> bool {
    let mapped = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    mapped.is_loopback() || mapped.is_unspecified() || UdpSocket::bind(SocketAddr::new(mapped, 0)).is_ok()
}

/// Why a destination is refused under `network`, or `None` when it is allowed.
pub fn refusal(network: Network, ip: IpAddr) -> Option<String> {
    match network {
        Network::Unrestricted => None,
        Network::None => Some("the network is off for this session (network: none)".into()),
        Network::Remote if is_this_host(ip) => {
            Some(format!("{ip} is this machine, which is not reachable under network: remote"))
        }
        Network::Remote => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_refuses_this_machine_only() {
        for local in ["127.0.0.1", "127.8.9.10", "::1", "0.0.0.0", "::ffff:127.0.0.1"] {
            assert!(refusal(Network::Remote, local.parse().unwrap()).is_some(), "{local}");
        }
        assert!(refusal(Network::Remote, "192.0.2.7".parse().unwrap()).is_none());
        assert!(refusal(Network::None, "192.0.2.7".parse().unwrap()).is_some());
        assert!(refusal(Network::Unrestricted, "127.0.0.1".parse().unwrap()).is_none());
    }
}
