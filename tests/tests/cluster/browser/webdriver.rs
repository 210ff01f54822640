//! A small W3C WebDriver client over `reqwest`, enough for the browser test: start
//! `chromedriver`, open a headless Chromium session, navigate, run a script, take a
//! screenshot. (WebDriver rather than `chromium --dump-dom`: the page keeps an event stream
//! open, so Chromium's virtual time never runs out and a dump never comes.)

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// A running `chromedriver` and one browser session on it; both end on drop.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `driver` on a free loopback port and a headless `chromium` session with the
    /// flags that work as root and keep it from calling home.
    pub async fn start(driver: &Path, chromium: &Path) -> anyhow::Result<Self> {
        let port = testkit::free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", driver.display()))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let base = format!("http://127.0.0.1:{port}");
        tests::wait_until(Duration::from_secs(30), "chromedriver to be ready", || {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let status: Value = http
                    .get(format!("{base}/status"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                status["value"]["ready"].as_bool().filter(|r| *r)
            }
        })
        .await?;
        let profile = tempfile::tempdir()?;
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--hide-scrollbars".to_owned(),
            "--window-size=1400,1300".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let answer = call(http.post(format!("{base}/session")).json(&caps)).await?;
        let session = answer["sessionId"]
            .as_str()
            .context("no sessionId in the new-session answer")?
            .to_owned();
        Ok(Self {
            http,
            base,
            session,
            _driver: child,
            _profile: profile,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/session/{}/{path}", self.base, self.session)
    }

    /// Navigates to `url` (returns once it has loaded).
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        call(self.http.post(self.url("url")).json(&json!({"url": url})))
            .await
            .map(|_| ())
    }

    /// Runs `script` (a function body) in the page; returns what it returned.
    pub async fn eval(&self, script: &str) -> anyhow::Result<Value> {
        call(
            self.http
                .post(self.url("execute/sync"))
                .json(&json!({"script": script, "args": []})),
        )
        .await
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> anyhow::Result<Vec<u8>> {
        let value = call(self.http.get(self.url("screenshot"))).await?;
        decode_base64(value.as_str().context("screenshot is not a string")?)
    }

    /// Ends the session (closes the browser).
    pub async fn close(self) -> anyhow::Result<()> {
        call(
            self.http
                .delete(format!("{}/session/{}", self.base, self.session)),
        )
        .await
        .map(|_| ())
    }
}

/// Sends one WebDriver command; returns its `value`, or fails with the driver's error.
async fn call(req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let resp = req.send().await.context("chromedriver unreachable")?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .context("chromedriver answer is not JSON")?;
    if !status.is_success() {
        bail!("webdriver command failed ({status}): {}", body["value"]);
    }
    Ok(body["value"].clone())
}

/// Standard base64 (with padding) to bytes.
fn decode_base64(text: &str) -> anyhow::Result<Vec<u8>> {
    let value = |c: u8| -> anyhow::Result<u32> {
        Ok(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => bail!("not base64: {:?}", c as char),
        })
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for chunk in clean.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|c| *c != b'=').collect();
        let mut n = 0u32;
        for (i, c) in data.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..data.len().max(1)]);
    }
    Ok(out)
}

#[test]
fn base64_decodes_with_and_without_padding() {
    assert_eq!(decode_base64("aGVsbG8=").unwrap_or_default(), b"hello");
    assert_eq!(decode_base64("aGk=").unwrap_or_default(), b"hi");
    assert_eq!(decode_base64("YWJj").unwrap_or_default(), b"abc");
    assert!(decode_base64("a$==").is_err());
}
