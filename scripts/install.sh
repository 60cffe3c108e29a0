#!/usr/bin/env bash
# Builds pkprof (release) and installs it with its shell completions and man pages, all generated
# from the binary's own command-line definition (`pkprof completions SHELL`, `pkprof man --dir`).
# Usage (as root):  bash scripts/install.sh
# Environment: PREFIX for the binary (default /usr/local: $PREFIX/bin/pkprof); DESTDIR to stage
# everything under another root (packaging); PKPROF_BIN to install that binary instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${PREFIX:-/usr/local}"
dest="${DESTDIR:-}"
export PATH="$HOME/.cargo/bin:$PATH"
bin="${PKPROF_BIN:-}"
if [ -z "$bin" ]; then
  bash scripts/setup.sh
  cargo build --release --locked -p pkprof
  bin=target/release/pkprof
fi

install -Dm755 "$bin" "$dest$prefix/bin/pkprof"
# Where Debian's bash-completion, zsh and fish look for packaged completions, and man's section 1.
bash_dir="$dest/usr/share/bash-completion/completions"
zsh_dir="$dest/usr/share/zsh/vendor-completions"
fish_dir="$dest/usr/share/fish/vendor_completions.d"
man_dir="$dest/usr/share/man/man1"
install -d "$bash_dir" "$zsh_dir" "$fish_dir" "$man_dir"
"$bin" completions bash > "$bash_dir/pkprof"
"$bin" completions zsh > "$zsh_dir/_pkprof"
"$bin" completions fish > "$fish_dir/pkprof.fish"
"$bin" man --dir "$man_dir"
gzip -nf9 "$man_dir"/pkprof*.1
echo "install: $dest$prefix/bin/pkprof, completions for bash, zsh and fish, man pages (man pkprof)"
