//! Symbolization (being written).
