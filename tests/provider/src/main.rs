//! `ambit-provider SCENARIO.json`: serves the scenario on a free loopback port and prints its base URL
//! (`http://127.0.0.1:PORT/v1`) as the first line of standard output, then serves until killed or until
//! its standard input closes when started with `--exit-on-eof`. `--var name=value` (repeatable) gives
//! `{{name}}` in the exchanges' expectations its value.

use std::io::Write;

use ambit_test_provider::{Provider, Script};
use std::io::Read;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exit_on_eof = args.iter().any(|a| a == "--exit-on-eof");
    let mut vars = std::collections::BTreeMap::new();
    let mut path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--var" {
            let Some((k, v)) = it.next().and_then(|kv| kv.split_once('=')) else {
                eprintln!("ambit-provider: --var takes name=value");
                std::process::exit(2);
            };
            vars.insert(k.to_string(), v.to_string());
        } else if !a.starts_with("--") {
            path = Some(a);
        }
    }
    let Some(path) = path else {
        eprintln!("usage: ambit-provider [--exit-on-eof] [--var name=value]... SCENARIO.json");
        std::process::exit(2);
    };
    let script = match Script::load(std::path::Path::new(path)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ambit-provider: {e}");
            std::process::exit(2);
        }
    };
    let script = Script { vars, ..script };
    let provider = match Provider::start(script).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ambit-provider: cannot listen on 127.0.0.1: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", provider.base_url());
    let _ = out.flush();
    if exit_on_eof {
        std::thread::spawn(|| {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            std::process::exit(0);
        });
    }
    std::future::pending::<()>().await;
}
