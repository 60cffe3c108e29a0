/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every chain of PKPROF_CHAINS (chains/chains.h), for the program that runs them all
 * (cpu_account.bpf.c). The two lists cannot drift apart: a chain listed but not included leaves
 * its hooks undefined (a -Wundefined-internal error naming the hook), a chain included but not
 * listed names a PKPROF_CHAIN_<SLOT> that does not exist.
 */
#ifndef PKPROF_CHAINS_ALL_BPF_H
#define PKPROF_CHAINS_ALL_BPF_H

#include "chains/net_rx.bpf.h"
#include "chains/block_io.bpf.h"
#include "chains/workqueue.bpf.h"
#include "chains/server.bpf.h"
#include "chains/wall.bpf.h"

#endif /* PKPROF_CHAINS_ALL_BPF_H */
