//! Drives Debian's headless Chromium over a page with `check.js` (playwright-core), for the HTML
//! exporter's tests; fails, saying to run `scripts/setup.sh`, when a piece is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A path under the test's scratch directory (`CARGO_TARGET_TMPDIR`).
pub fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// Runs `check.js` on `page` (saved as `<stem>.html`): click the frame named `frame`, search for
/// `term`; screenshots `<stem>-overview.png` (as opened) and `<stem>.png` (zoomed, searched).
/// Returns what check.js saw (JSON); fails with what to do when Chromium or playwright-core is
/// missing.
pub fn browser_check(page: &str, stem: &str, frame: &str, term: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/html");
    let chromium = std::env::var("PKPROF_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing = |what: &str| -> ! {
        panic!("{what} is missing: run scripts/setup.sh (as root) to install Chromium, node and playwright-core")
    };
    if !Path::new(&chromium).exists() {
        missing(&chromium);
    }
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        missing("crates/report/tests/html/node_modules/playwright-core");
    }
    let file = tmp(&format!("{stem}.html"));
    let shot = tmp(&format!("{stem}.png"));
    std::fs::write(&file, page).unwrap();
    let _ = std::fs::remove_file(&shot);
    let out = match Command::new("node")
        .arg(dir.join("check.js"))
        .args([file.as_os_str(), shot.as_os_str()])
        .args([frame, term])
        .output()
    {
        Ok(out) => out,
        Err(e) => missing(&format!("node ({e})")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "check.js failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(shot.exists(), "no screenshot at {}", shot.display());
    eprintln!("{stdout}\nscreenshot: {}", shot.display());
    stdout
}
