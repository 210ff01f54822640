//! The `parleyctl` binary: see the library ([`parleyctl`]) and the book's
//! `docs/src/operating/parleyctl.md`.

use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let code = parleyctl::main_with(std::env::args_os(), &mut out, &mut err).await;
    let _ = out.flush();
    std::process::exit(code);
}
