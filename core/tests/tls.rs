//! HTTPS to a model provider with a private CA, as behind a corporate proxy or a self-hosted gateway:
//! the core's HTTP client trusts the certificates in `SSL_CERT_FILE` (or the directories in
//! `SSL_CERT_DIR`), read when a client is built, and speaks HTTP/2 when the server offers it by ALPN.
//! Negative control: the same run without the CA fails with the typed transport error naming the
//! certificate problem, and is not retried: the server sees one connection (one TLS handshake), where
//! the client's default two retries would make three.
//!
//! One test in this binary: it sets the process environment, which nothing else here reads meanwhile.

use ambit::{Agent, Error, OpenAiChat};
use ambit_test_provider::tls::Tls;
use ambit_test_provider::{Provider, Script};
use serde_json::json;

fn script() -> Script {
    serde_json::from_value(json!({"name": "tls", "exchanges": [
        {"respond": {"content": "over TLS"}}
    ]}))
    .unwrap()
}

fn agent(provider: &Provider) -> Agent {
    Agent::builder().model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k")).build().unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_trusts_the_ca_in_ssl_cert_file_and_fails_naming_the_certificate_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let tls = Tls::generate().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &tls.ca_pem).unwrap();

    // Negative control: the CA is not trusted (the system's roots only).
    // SAFETY: the only test of this binary, on a current-thread runtime: no other thread reads the environment.
    unsafe {
        std::env::remove_var("SSL_CERT_FILE");
        std::env::remove_var("SSL_CERT_DIR");
    }
    let untrusted = Provider::start_tls(script(), tls.clone()).await.unwrap();
    assert!(untrusted.base_url().starts_with("https://127.0.0.1:"), "{}", untrusted.base_url());
    let err = agent(&untrusted).run("hi").await.expect_err("the CA is not trusted");
    assert!(matches!(err, Error::Model(ambit::ModelError::Transport(_))), "{err:?}");
    assert_eq!(err.code(), "model_transport");
    let shown = err.to_string();
    assert!(shown.contains("certificate was refused") && shown.contains("UnknownIssuer"), "{shown}");
    assert!(shown.contains("SSL_CERT_FILE"), "the error says how to trust a private CA: {shown}");
    assert_eq!(untrusted.report().0, 0, "no request got through");
    // The handshake fails before any request the provider counts: only its accepted connections show a
    // retry (the client's default is two retries, three attempts).
    assert_eq!(untrusted.connections(), 1, "a refused certificate is not retried");

    // With the CA in SSL_CERT_FILE: the run succeeds, over HTTP/2.
    // SAFETY: as above.
    unsafe { std::env::set_var("SSL_CERT_FILE", &ca) };
    let trusted = Provider::start_tls(script(), tls).await.unwrap();
    let result = agent(&trusted).run("hi").await.expect("the CA is trusted");
    assert_eq!(result.output, "over TLS");
    assert_eq!(trusted.http_versions(), ["HTTP/2.0"], "h2 negotiated by ALPN");
}
