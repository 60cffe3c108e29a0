//! The golden-file comparer of every crate's tests (a dev-dependency only): an output is compared
//! with its golden file, and a mismatch fails with a line diff (`-` golden, `+` output, with the
//! golden file's line numbers and two lines of context). `PKPROF_BLESS=1` rewrites the golden
//! files on purpose; without it a missing golden file is a failure, never created silently (the
//! house style's "Tests" section, after inferno's `tests/common/`).

use std::path::Path;

/// The environment switch that rewrites golden files.
pub const BLESS: &str = "PKPROF_BLESS";

/// True when the run rewrites golden files (`PKPROF_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os(BLESS).is_some_and(|v| v == "1")
}

/// Compares `actual` with the golden file at `path`: equal, or a panic with a line diff. With
/// `PKPROF_BLESS=1` writes `actual` there instead (creating the directory). A golden file that
/// cannot be read is a failure that shows the whole output.
#[track_caller]
pub fn assert_golden(path: impl AsRef<Path>, actual: &str) {
    let path = path.as_ref();
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("blessed {}", path.display());
        return;
    }
    let expected = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!(
            "golden file {} cannot be read ({e}): if the output below is right, create it with \
             {BLESS}=1\n{actual}",
            path.display()
        ),
    };
    if expected != actual {
        panic!(
            "{} differs from the output (- golden, + actual; {BLESS}=1 rewrites it):\n{}",
            path.display(),
            diff(&expected, actual)
        );
    }
}

/// Above this many line pairs the diff compares lines by position instead of searching for the
/// longest common subsequence (whose table would be too large).
const LCS_MAX_CELLS: usize = 16_000_000;

/// A line diff of `expected` (the golden file) against `actual`: changed lines with two lines of
/// context, `-` with the golden file's line number, `+` with the output's.
pub fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let (n, m) = (a.len(), b.len());
    // (tag, line number in the golden file for ' ' and '-', in the output for '+', text)
    let mut ops: Vec<(char, usize, &str)> = Vec::new();
    if (n + 1).saturating_mul(m + 1) > LCS_MAX_CELLS {
        for i in 0..n.max(m) {
            match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) if x == y => ops.push((' ', i + 1, x)),
                (x, y) => {
                    if let Some(x) = x {
                        ops.push(('-', i + 1, x));
                    }
                    if let Some(y) = y {
                        ops.push(('+', i + 1, y));
                    }
                }
            }
        }
    } else {
        let mut lcs = vec![vec![0u32; m + 1]; n + 1];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i][j] = if a[i] == b[j] {
                    lcs[i + 1][j + 1] + 1
                } else {
                    lcs[i + 1][j].max(lcs[i][j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && a[i] == b[j] {
                ops.push((' ', i + 1, a[i]));
                i += 1;
                j += 1;
            } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
                ops.push(('-', i + 1, a[i]));
                i += 1;
            } else {
                ops.push(('+', j + 1, b[j]));
                j += 1;
            }
        }
    }
    let near_change = |k: usize| {
        ops[k.saturating_sub(2)..(k + 3).min(ops.len())]
            .iter()
            .any(|o| o.0 != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (tag, line, text)) in ops.iter().enumerate() {
        if near_change(k) {
            if skipped {
                out.push_str("   ...\n");
                skipped = false;
            }
            out.push_str(&format!("{tag} {line:4} | {text}\n"));
        } else {
            skipped = true;
        }
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        out.push_str("(the final newline differs)\n");
    }
    if out.is_empty() {
        out.push_str("(the line endings differ)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{assert_golden, blessing, diff};

    #[test]
    fn a_missing_golden_file_fails_and_is_not_created() {
        if blessing() {
            return; // blessing creates it, on purpose
        }
        let path =
            std::env::temp_dir().join(format!("pkprof-golden-missing-{}", std::process::id()));
        let r = std::panic::catch_unwind(|| assert_golden(&path, "output\n"));
        assert!(r.is_err());
        assert!(!path.exists());
    }

    #[test]
    fn a_different_output_fails() {
        if blessing() {
            return;
        }
        let path =
            std::env::temp_dir().join(format!("pkprof-golden-differs-{}", std::process::id()));
        std::fs::write(&path, "a\nb\n").unwrap();
        assert_golden(&path, "a\nb\n");
        let r = std::panic::catch_unwind(|| assert_golden(&path, "a\nc\n"));
        let _ = std::fs::remove_file(&path);
        assert!(r.is_err());
    }

    #[test]
    fn shows_changed_lines_with_context() {
        let d = diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n");
        assert_eq!(
            d,
            "   ...\n     2 | b\n     3 | c\n-    4 | d\n+    4 | D\n     5 | e\n     6 | f\n"
        );
    }

    #[test]
    fn says_when_only_the_final_newline_differs() {
        assert_eq!(diff("a\n", "a"), "(the final newline differs)\n");
        assert_eq!(diff("a\r\n", "a\n"), "(the line endings differ)\n");
    }
}
