//! One JSON object per frame, on one line (JSON Lines): `--json` and the `/stream` endpoint.

use pkprof_accounting::Interval;

/// The frame as a single line of JSON, without the trailing newline.
pub fn render(frame: &Interval) -> String {
    serde_json::to_string(frame).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
