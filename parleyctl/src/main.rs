//! The `parleyctl` binary: see the library ([`parleyctl`]) and README's `parleyctl` section.

use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let code = parleyctl::main_with(std::env::args_os(), &mut out, &mut err).await;
    let _ = out.flush();
    std::process::exit(code);
}
