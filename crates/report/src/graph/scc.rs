//! Strongly connected components (Tarjan), iterative so that deep call chains cannot overflow the
//! stack. gprof's cycles are the components with more than one routine.

/// The component of each of `n` nodes (`edges` as (from, to); self-loops are ignored), numbered
/// from 0 in the order Tarjan completes them.
pub(crate) fn components(n: usize, edges: &[(u32, u32)]) -> Vec<u32> {
    // Adjacency in compressed rows.
    let mut start = vec![0u32; n + 1];
    for &(a, b) in edges {
        if a != b {
            start[a as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut adj = vec![0u32; start[n] as usize];
    for &(a, b) in edges {
        if a != b {
            adj[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
        }
    }

    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![UNSEEN; n];
    let mut stack: Vec<u32> = Vec::new();
    // (node, next edge to look at)
    let mut call: Vec<(u32, u32)> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN {
            continue;
        }
        call.push((root, start[root as usize]));
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut e)) = call.last_mut() {
            let vi = v as usize;
            if *e < start[vi + 1] {
                let w = adj[*e as usize];
                *e += 1;
                let wi = w as usize;
                if index[wi] == UNSEEN {
                    index[wi] = next_index;
                    low[wi] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[wi] = true;
                    call.push((w, start[wi]));
                } else if on_stack[wi] {
                    low[vi] = low[vi].min(index[wi]);
                }
                continue;
            }
            // v is done.
            call.pop();
            if let Some(&(parent, _)) = call.last() {
                low[parent as usize] = low[parent as usize].min(low[vi]);
            }
            if low[vi] == index[vi] {
                loop {
                    let w = stack.pop().expect("Tarjan stack holds v");
                    on_stack[w as usize] = false;
                    comp[w as usize] = next_comp;
                    if w == v {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::components;

    #[test]
    fn cycles_and_chains() {
        // 0 -> 1 -> 2 -> 1, 2 -> 3, 3 -> 3, 4 alone
        let c = components(5, &[(0, 1), (1, 2), (2, 1), (2, 3), (3, 3)]);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[0], c[1]);
        assert_ne!(c[3], c[1]);
        assert_ne!(c[4], c[0]);
        let mut distinct = c.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 200_000;
        let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|i| (i, i + 1)).collect();
        let c = components(n, &edges);
        assert_eq!(c.iter().filter(|&&x| x == c[0]).count(), 1);
        let mut ring = edges.clone();
        ring.push((n as u32 - 1, 0));
        let c = components(n, &ring);
        assert!(c.iter().all(|&x| x == c[0]));
    }
}
