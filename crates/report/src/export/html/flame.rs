//! The flame graph: named stacks merged into a call tree, narrow branches pruned, written as folded
//! lines (one or two counts) for inferno, whose SVG is then made fit to sit inline in the page.
//!
//! Inferno draws; the tree in front of it only keeps its input small. A million sample groups over
//! 50,000 stacks would be ~80 MB of folded text; cut at the width inferno would not draw anyway,
//! it is a few thousand lines. A pruned branch's samples stay in its parent's own line, so every
//! drawn frame keeps its exact width (and, in a diff, its parent's colour includes the branch).

use inferno::flamegraph::color::{BackgroundColor, Color, PaletteMap, StrokeColor};
use inferno::flamegraph::{self, Options};

use super::fold::{Folded, Kind, Names};
use crate::ReportError;

/// Frames narrower than this share of the whole graph (percent) are not drawn.
pub(crate) const MIN_WIDTH_PCT: f64 = 0.02;
/// Counts above this are scaled down before drawing (inferno counts in `usize` and the page's
/// script in doubles); the tool tips multiply them back.
const MAX_DRAWN: u128 = 1 << 50;

/// The merged call tree of one profile, or of two (A, B) for a diff.
pub(crate) struct Tree {
    /// Node 0 is the root. Parents come before their children.
    label: Vec<u32>,
    parent: Vec<u32>,
    count: Vec<[u128; 2]>,
}

impl Tree {
    /// The tree of `sides` (one profile, or A and B of a diff), side `i` counting `sides[i]`.
    ///
    /// The stacks are sorted and each one shares the nodes of its common prefix with the one
    /// before, as inferno merges folded lines: no hashing, and memory is walked in order.
    pub(crate) fn build(sides: &[&Folded]) -> Self {
        let mut items: Vec<(&[u32], usize, u128)> = Vec::new();
        for (side, folded) in sides.iter().enumerate() {
            items.extend(folded.iter().map(|(stack, n)| (stack, side, n)));
        }
        items.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut tree = Tree {
            label: vec![u32::MAX],
            parent: vec![0],
            count: vec![[0, 0]],
        };
        let mut path: Vec<u32> = Vec::new();
        let mut prev: &[u32] = &[];
        for (stack, side, n) in items {
            let common = prev.iter().zip(stack).take_while(|(a, b)| a == b).count();
            path.truncate(common);
            for &name in &stack[common..] {
                let id = tree.label.len() as u32;
                tree.label.push(name);
                tree.parent.push(path.last().copied().unwrap_or(0));
                tree.count.push([0, 0]);
                path.push(id);
            }
            tree.count[0][side] += n;
            for &id in &path {
                tree.count[id as usize][side] += n;
            }
            prev = stack;
        }
        tree
    }

    /// Multiplies side 0 by `factor` (a diff's normalisation of A to B's total).
    pub(crate) fn scale_first(&mut self, factor: f64) {
        for c in &mut self.count {
            c[0] = (c[0] as f64 * factor).round() as u128;
        }
    }

    /// Folded lines of the nodes at least `MIN_WIDTH_PCT` wide (by side `width_side`), each with
    /// its own count (`diff`: both counts, A then B), in depth-first order, and the divisor applied
    /// to the counts.
    ///
    /// The order matters: inferno merges a frame only across consecutive lines, and its own sort
    /// (byte order of whole lines) splits `foo` from its children when a sibling such as
    /// `foo::bar` sorts between them (`' ' < ':' < ';'`). Depth-first order keeps every subtree
    /// together; [`Tree::svg`] hands it over unsorted.
    fn lines(&self, names: &Names, width_side: usize, diff: bool) -> (Vec<String>, u128) {
        let total = self.count[0][width_side];
        let max = self.count[0][0].max(self.count[0][1]);
        let div = max.div_ceil(MAX_DRAWN).max(1);
        // Half inferno's own cut: the final word on what is drawn stays with inferno.
        let cut = total as f64 * MIN_WIDTH_PCT / 100.0 / 2.0;
        let n = self.label.len();
        let mut keep = vec![false; n];
        keep[0] = true;
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for i in 1..n {
            let p = self.parent[i] as usize;
            if keep[p] && self.count[i][width_side] as f64 >= cut && self.count[i][width_side] > 0 {
                keep[i] = true;
                children[p].push(i as u32);
            }
        }
        // Siblings by name, so the graph reads the same every time.
        for c in &mut children {
            c.sort_unstable_by(|&x, &y| {
                let name = |n: u32| &names.names[self.label[n as usize] as usize];
                name(x).cmp(name(y))
            });
        }
        let mut out = Vec::new();
        let mut path = String::new();
        // Depth-first pre-order, iteratively: (node, length of `path` before it).
        let mut todo: Vec<(u32, usize)> = children[0].iter().rev().map(|&c| (c, 0)).collect();
        while let Some((node, len)) = todo.pop() {
            path.truncate(len);
            if len > 0 {
                path.push(';');
            }
            path.push_str(&names.names[self.label[node as usize] as usize]);
            let mut own = self.count[node as usize];
            for &c in &children[node as usize] {
                own[0] -= self.count[c as usize][0].min(own[0]);
                own[1] -= self.count[c as usize][1].min(own[1]);
            }
            let (a, b) = (own[0] / div, own[1] / div);
            if diff && (a > 0 || b > 0) {
                out.push(format!("{path} {a} {b}"));
            } else if !diff && a > 0 {
                out.push(format!("{path} {a}"));
            }
            let here = path.len();
            todo.extend(children[node as usize].iter().rev().map(|&c| (c, here)));
        }
        (out, div)
    }

    /// The flame graph SVG, ready to be placed inline in an HTML page.
    pub(crate) fn svg(
        &self,
        names: &Names,
        diff: bool,
        title: &str,
        subtitle: Option<String>,
    ) -> Result<String, ReportError> {
        let (lines, div) = self.lines(names, usize::from(diff), diff);
        let mut palette = PaletteMap::default();
        if !diff {
            for (name, kind) in names.names.iter().zip(&names.kinds) {
                palette.insert(name, color(name, *kind));
            }
        }
        let mut opts = Options::default();
        opts.title = title.to_string();
        opts.subtitle = subtitle;
        opts.count_name = "samples".to_string();
        opts.name_type = "Function:".to_string();
        opts.font_type = "monospace".to_string();
        opts.min_width = MIN_WIDTH_PCT;
        opts.factor = div as f64;
        opts.deterministic = true;
        opts.no_javascript = true;
        // Flame-chart mode is the one way to keep inferno from sorting the lines (it only
        // reverses them, which is undone here): see `lines`.
        opts.flame_chart = true;
        let grey = |v: u8| Color { r: v, g: v, b: v };
        if diff {
            // Unchanged frames are near white: outline every frame on a grey ground.
            opts.bgcolors = Some(BackgroundColor::Flat(grey(236)));
            opts.stroke_color = StrokeColor::Color(grey(190));
        } else {
            opts.bgcolors = Some(BackgroundColor::Flat(grey(250)));
            opts.palette_map = Some(&mut palette);
        }
        let mut svg = Vec::new();
        flamegraph::from_lines(&mut opts, lines.iter().rev().map(String::as_str), &mut svg)
            .map_err(|e| ReportError::Io(std::io::Error::other(format!("flame graph: {e}"))))?;
        let svg = String::from_utf8(svg)
            .map_err(|e| ReportError::Io(std::io::Error::other(format!("flame graph: {e}"))))?;
        Ok(inline(&svg))
    }
}

/// A frame's colour: warm for user code, blue for the kernel, green for the syscall boundary,
/// violet for Python functions, grey for idle; the shade comes from the name, so a function keeps its colour everywhere.
pub(crate) fn color(name: &str, kind: Kind) -> Color {
    // FNV-1a: stable across runs and platforms.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let v = |shift: u32, span: u32| ((h >> shift) & 0xff) as u32 * span / 255;
    let c = |r: u32, g: u32, b: u32| Color {
        r: r as u8,
        g: g as u8,
        b: b as u8,
    };
    match kind {
        Kind::User => c(205 + v(0, 50), 80 + v(8, 150), 40 + v(16, 40)),
        Kind::Kernel => c(70 + v(0, 60), 130 + v(8, 60), 200 + v(16, 55)),
        Kind::Syscall => c(60 + v(0, 40), 185 + v(8, 50), 70 + v(16, 40)),
        Kind::Python => c(150 + v(0, 50), 90 + v(8, 40), 200 + v(16, 55)),
        Kind::Idle => {
            let g = 185 + v(0, 30);
            c(g, g, g)
        }
    }
}

/// Inferno writes a standalone SVG file; inline in HTML it must lose the XML declaration, the
/// DOCTYPE, its comments (which link to the web), the `onload` hook and its script (the page has
/// its own), and the namespace declarations HTML does not need. Only the prelude before the
/// frames is touched; frames are copied as they are.
fn inline(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    let frames = svg[start..]
        .find("<svg id=\"frames\"")
        .map_or(svg.len(), |i| start + i);
    let mut prelude = svg[start..frames].to_string();
    for (open, close) in [("<!--", "-->"), ("<script", "</script>")] {
        while let Some(i) = prelude.find(open) {
            let Some(j) = prelude[i..].find(close) else {
                break;
            };
            prelude.replace_range(i..i + j + close.len(), "");
        }
    }
    for attr in [
        " onload=\"init(evt)\"",
        " xmlns:xlink=\"http://www.w3.org/1999/xlink\"",
        " xmlns:fg=\"http://github.com/jonhoo/inferno\"",
    ] {
        prelude = prelude.replacen(attr, "", 1);
    }
    let mut out = String::with_capacity(svg.len());
    out.push_str(&prelude);
    out.push_str(&svg[frames..]);
    out
}
