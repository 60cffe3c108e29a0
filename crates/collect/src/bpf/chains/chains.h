/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The plug-in lists of the accounting core (docs/design.md, "How a chain plugs in"): the one place
 * that names the attribution chains and the link sinks. The core reaches each of them only through
 * these lists; nothing else names a chain.
 *
 * CHAIN(name, SLOT): chains/<name>.bpf.h defines the chain hooks (see core.bpf.h,
 * PKPROF_CHAIN_HOOKS) and `SLOT` names its served-time slot, enum pkprof_chain's
 * PKPROF_CHAIN_<SLOT>: the order of this list is the order of pkprof_served.ns[] (read by user
 * space), so a new chain goes at the end. `SLOT` lower-cased is its `kind` label ("net").
 *
 * Each list stays on one line: the builds read it (chains/chain_list.rs) to generate
 * chains/all.bpf.h (the includes of the program that runs them all), the Rust side's modules and
 * CHAINS (crates/collect/build.rs), and NR_CHAINS and CHAIN_NAMES (crates/accounting/build.rs).
 *
 * SINK(name): a consumer of the tag life cycle's link events (record/links.bpf.h: `record`),
 * which defines <name>_link().
 *
 * A build may define either list before including any header to build the core with a subset
 * (the header test compiles each chain alone with the core: tests/headers_compile.rs).
 */
#ifndef PKPROF_CHAINS_H
#define PKPROF_CHAINS_H

#ifndef PKPROF_CHAINS
#define PKPROF_CHAINS(CHAIN) CHAIN(net_rx, NET) CHAIN(block_io, BLOCK) CHAIN(workqueue, WORKQ) CHAIN(server, SERVER)
#endif

/*
 * OBSERVER(name): a plug-in that follows every context switch but bills no one (no served slot):
 * chains/<name>.bpf.h defines <name>_switch_out(c, e, prev, ctx) and <name>_switch_in(c, next), called
 * after the chains' hooks of the same name. The wall chain (per-thread wall-time classes).
 */
#ifndef PKPROF_OBSERVERS
#define PKPROF_OBSERVERS(OBSERVER) OBSERVER(wall)
#endif

#ifndef PKPROF_SINKS
#define PKPROF_SINKS(SINK) SINK(record)
#endif

#endif /* PKPROF_CHAINS_H */
