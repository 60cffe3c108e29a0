//! `pkprof agent`'s parts that need no kernel (docs/design.md, "The agent"): the configuration
//! (`config`: TOML file and flags), windows and where they go (`window`: [`WindowSink`], the
//! per-window exact figures), merging windows (`merge`), the local store with its index and
//! retention (`store`), and the control socket (`ctl`). The running agent, which wires these to
//! the BPF collector, is `crates/cli/src/agent`.

pub mod config;
pub mod ctl;
pub mod merge;
pub mod store;
pub mod window;

pub use config::{Config, ConfigError, Overrides};
pub use merge::merge;
pub use store::Store;
pub use window::{Deltas, MemoryWindows, WindowSink};
