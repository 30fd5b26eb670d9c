//! HTTPS for the loopback providers, as the hosted APIs serve it: a certificate authority and a server
//! certificate for `127.0.0.1` and `localhost` made at start (nothing on disk but the CA's PEM, for the
//! client to trust), and HTTP/2 or HTTP/1.1 chosen by ALPN (`h2` preferred) on each connection.
//! An HTTP/2 connection takes up to [`MAX_STREAMS`] requests at once: the server is never what limits
//! how many runs share one connection.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// Concurrent streams one HTTP/2 connection accepts (hyper's default is 200).
pub const MAX_STREAMS: u32 = 100_000;

/// A server identity made at start: the CA a client trusts, and the acceptor that serves with the
/// certificate it signed.
#[derive(Clone)]
pub struct Tls {
    /// The CA's certificate, PEM: what a client puts in its trust store (`SSL_CERT_FILE`,
    /// `NODE_EXTRA_CA_CERTS`).
    pub ca_pem: String,
    acceptor: TlsAcceptor,
}

impl Tls {
    /// A fresh CA and a server certificate it signed for `127.0.0.1`, `::1` and `localhost`.
    pub fn generate() -> Result<Tls, String> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
        let err = |e: rcgen::Error| format!("the test certificate could not be made: {e}");
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca.distinguished_name.push(DnType::CommonName, "ambit test provider CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().map_err(err)?;
        let mut leaf =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]).map_err(err)?;
        leaf.distinguished_name.push(DnType::CommonName, "localhost");
        let cert = leaf.signed_by(&key, &issuer).map_err(err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), ca_cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .map_err(|e| format!("the test certificate was refused: {e}"))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Tls { ca_pem: ca_cert.pem(), acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    /// Serves one accepted connection: the TLS handshake, then HTTP/2 or HTTP/1.1 as ALPN chose.
    pub async fn serve<S, F>(&self, stream: TcpStream, service: S)
    where
        S: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
        F: Future<Output = Result<Response<Full<Bytes>>, std::convert::Infallible>> + Send + 'static,
    {
        let Ok(tls) = self.acceptor.accept(stream).await else { return };
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http2().max_concurrent_streams(MAX_STREAMS);
        let service = hyper::service::service_fn(service);
        let _ = builder.serve_connection(TokioIo::new(tls), service).await;
    }
}
