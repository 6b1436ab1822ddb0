//! Collectives of 1 to 4 ranks, each a thread with its own `Comm` on one
//! segment (more threads than the dev machine's 2 CPUs: the waiting
//! policy's oversubscribed case).

use super::*;

/// Runs `f(rank's comm)` on `n` ranks, each a thread, built-in rules.
fn job(n: usize, f: fn(&mut Comm)) {
    crate::threads_job::job(n, None, f)
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn as_i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Rank r's element i for the integer checks.
fn val(r: usize, i: usize) -> i64 {
    (r as i64 + 1) * 1000 + (i % 997) as i64
}

/// Rank `me`'s elements and their sums over the `n` ranks.
fn mine_and_sum(n: usize, me: usize, count: usize) -> (Vec<i64>, Vec<i64>) {
    let mine = (0..count).map(|i| val(me, i)).collect();
    (
        mine,
        (0..count)
            .map(|i| (0..n).map(|r| val(r, i)).sum())
            .collect(),
    )
}

/// Element counts: tiny, not dividing by the ranks, and by blocks (>= 16 KiB).
const COUNTS: [usize; 4] = [1, 3, 2049, 5001];

#[test]
fn broadcasts_reach_every_rank_from_every_root() {
    for n in 1..=4 {
        job(n, |c| {
            let n = c.size();
            for len in [0, 7, 40_000] {
                for root in 0..n {
                    let want: Vec<u8> = (0..len).map(|i| (i * 7 + root) as u8).collect();
                    let mut b = if c.rank() == root {
                        want.clone()
                    } else {
                        vec![0; len]
                    };
                    bcast(c, &mut b, root).unwrap();
                    assert_eq!(b, want, "{n} ranks, {len} bytes, root {root}");
                }
            }
        });
    }
}

#[test]
fn allreduces_give_exact_sums_minima_and_maxima_in_place_or_not() {
    for n in 1..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for count in COUNTS {
                let (mine, sum) = mine_and_sum(n, me, count);
                let mut out = vec![0u8; count * 8];
                allreduce(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut out).unwrap();
                assert_eq!(as_i64s(&out), sum, "{n} ranks, {count} elements");
                let mut inplace = i64s(&mine);
                allreduce(c, Dtype::I64, Op::Sum, None, &mut inplace).unwrap();
                assert_eq!(as_i64s(&inplace), sum, "{n} ranks, {count} in place");
                allreduce(c, Dtype::I64, Op::Max, Some(&i64s(&mine)), &mut out).unwrap();
                assert!(as_i64s(&out)
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == val(n - 1, i)));
                allreduce(c, Dtype::I64, Op::Min, Some(&i64s(&mine)), &mut out).unwrap();
                assert!(as_i64s(&out)
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == val(0, i)));
            }
            let mut p = 0i32.to_ne_bytes();
            allreduce(
                c,
                Dtype::I32,
                Op::Prod,
                Some(&(me as i32 + 2).to_ne_bytes()),
                &mut p,
            )
            .unwrap();
            assert_eq!(i32::from_ne_bytes(p), (2..n as i32 + 2).product::<i32>());
        });
    }
}

/// Runs `f` on ranks planned on PUs `pus` of 2 packages x 2 cores.
fn job_two_packages(pus: &[u32], f: fn(&mut Comm)) {
    let m = topocomm_topo::load_default(Some("synthetic:package:2 core:2 pu:1")).unwrap();
    let pus: Vec<Option<u32>> = pus.iter().map(|&p| Some(p)).collect();
    crate::threads_job::job_on(&m, &pus, None, f)
}

/// Small broadcasts, reductions and allreduces along the near order: 3
/// and 4 ranks dealt round-robin over two packages.
fn near_order_collectives(c: &mut Comm) {
    let (n, me) = (c.size(), c.rank());
    let mut near = c.job_near().expect("the ranks differ in locality").clone();
    // Package 0 (PUs 0, 1) holds ranks 0 and 2.
    assert_eq!(&near.ranks[..2], &[0, 2]);
    for root in 0..n {
        let order = near.rooted_at(root);
        assert_eq!(order[0], root);
        let mut b = if me == root {
            vec![root as u8 + 1; 7]
        } else {
            vec![0; 7]
        };
        bcast(c, &mut b, root).unwrap();
        assert_eq!(b, vec![root as u8 + 1; 7], "{n} ranks, root {root}");
        let (mine, sum) = mine_and_sum(n, me, 3);
        let mut out = vec![0u8; 24];
        reduce(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut out, root).unwrap();
        if me == root {
            assert_eq!(as_i64s(&out), sum, "{n} ranks, reduce to {root}");
        }
    }
    let mine: Vec<f64> = (0..16)
        .map(|i| (i * 7 + me * 13) as f64 * 1e-3 + 1e8 * (me % 2) as f64)
        .collect();
    same_sums_every_time_and_everywhere(c, &mine, 10, &format!("{n} ranks"));
}

/// Allreduces `mine` (doubles) `times` more times after a first: the same
/// bits each time, and on every rank.
fn same_sums_every_time_and_everywhere(c: &mut Comm, mine: &[f64], times: usize, what: &str) {
    let mut first = vec![0u8; mine.len() * 8];
    allreduce(c, Dtype::F64, Op::Sum, Some(&f64s(mine)), &mut first).unwrap();
    for _ in 0..times {
        let mut again = vec![0u8; mine.len() * 8];
        allreduce(c, Dtype::F64, Op::Sum, Some(&f64s(mine)), &mut again).unwrap();
        assert_eq!(again, first, "{what}");
    }
    let mut all = vec![0u8; c.size() * first.len()];
    allgather(c, Some(&first), &mut all).unwrap();
    assert!(
        all.chunks_exact(first.len()).all(|b| b == first),
        "{what}: ranks differ"
    );
}

#[test]
fn small_collectives_run_along_the_near_order_of_ranks_over_two_packages() {
    // Rank r on PU [0, 2, 1, 3][r]: ranks 0 and 2 in package 0.
    job_two_packages(&[0, 2, 1, 3], near_order_collectives);
    job_two_packages(&[0, 2, 1], near_order_collectives);
}

#[test]
fn double_sums_are_the_same_bits_every_time_and_on_every_rank() {
    for n in 2..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for count in [16, 5000] {
                // Magnitudes 1e-8..1e8: the order of the additions shows.
                let mine: Vec<f64> = (0..count)
                    .map(|i| ((i * 31 + me * 17) % 101) as f64 * 10f64.powi((i % 17) as i32 - 8))
                    .collect();
                same_sums_every_time_and_everywhere(
                    c,
                    &mine,
                    20,
                    &format!("{n} ranks, {count} doubles"),
                );
            }
        });
    }
}

#[test]
fn reductions_reach_every_root_in_place_or_not() {
    for n in 1..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for count in COUNTS {
                let (mine, sum) = mine_and_sum(n, me, count);
                for root in 0..n {
                    // Only the root's receive buffer is significant.
                    let mut out = vec![0u8; if me == root { count * 8 } else { 0 }];
                    reduce(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut out, root).unwrap();
                    if me == root {
                        assert_eq!(as_i64s(&out), sum, "{n} ranks, {count}, root {root}");
                        let mut inplace = i64s(&mine);
                        reduce(c, Dtype::I64, Op::Sum, None, &mut inplace, root).unwrap();
                        assert_eq!(as_i64s(&inplace), sum, "in place, root {root}");
                    } else {
                        reduce(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut [], root).unwrap();
                    }
                }
            }
        });
    }
}

#[test]
fn scans_give_exact_prefix_sums_and_minima_in_place_or_not() {
    for n in 1..=5 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for count in COUNTS {
                let mine: Vec<i64> = (0..count).map(|i| val(me, i)).collect();
                let upto = |last: usize| -> Vec<i64> {
                    (0..count)
                        .map(|i| (0..=last).map(|r| val(r, i)).sum())
                        .collect()
                };
                let mut out = vec![0u8; count * 8];
                scan(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut out).unwrap();
                assert_eq!(as_i64s(&out), upto(me), "scan, {n} ranks, {count} elements");
                let mut inplace = i64s(&mine);
                scan(c, Dtype::I64, Op::Sum, None, &mut inplace).unwrap();
                assert_eq!(as_i64s(&inplace), upto(me), "scan in place, {n} ranks");
                // val grows with the rank: the minimum of ranks 0..=r is rank 0's.
                scan(c, Dtype::I64, Op::Min, Some(&i64s(&mine)), &mut out).unwrap();
                assert!(as_i64s(&out)
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == val(0, i)));

                // Exclusive: rank 0's buffer keeps what it held.
                let sentinel = i64s(&vec![-7; count]);
                let mut ex = sentinel.clone();
                exscan(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut ex).unwrap();
                let mut ex_in = i64s(&mine);
                exscan(c, Dtype::I64, Op::Sum, None, &mut ex_in).unwrap();
                if me == 0 {
                    assert_eq!(ex, sentinel, "exscan leaves rank 0's buffer");
                    assert_eq!(as_i64s(&ex_in), mine, "exscan in place, rank 0");
                } else {
                    assert_eq!(as_i64s(&ex), upto(me - 1), "exscan, {n} ranks, {count}");
                    assert_eq!(as_i64s(&ex_in), upto(me - 1), "exscan in place");
                }
                scan(c, Dtype::I64, Op::Max, Some(&i64s(&mine)), &mut out).unwrap();
                assert!(as_i64s(&out)
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == val(me, i)));
            }
        });
    }
}

#[test]
fn double_scans_are_the_same_bits_every_time() {
    for n in [3, 4, 5] {
        job(n, |c| {
            let me = c.rank();
            let mine: Vec<f64> = (0..300)
                .map(|i| ((i * 31 + me * 17) % 101) as f64 * 10f64.powi((i % 17) as i32 - 8))
                .collect();
            let (mut first, mut first_ex) = (vec![0u8; 2400], vec![0u8; 2400]);
            scan(c, Dtype::F64, Op::Sum, Some(&f64s(&mine)), &mut first).unwrap();
            exscan(c, Dtype::F64, Op::Sum, Some(&f64s(&mine)), &mut first_ex).unwrap();
            for _ in 0..20 {
                let (mut again, mut again_ex) = (vec![0u8; 2400], vec![0u8; 2400]);
                scan(c, Dtype::F64, Op::Sum, Some(&f64s(&mine)), &mut again).unwrap();
                exscan(c, Dtype::F64, Op::Sum, Some(&f64s(&mine)), &mut again_ex).unwrap();
                assert_eq!(again, first, "scan, rank {me}");
                assert_eq!(again_ex, first_ex, "exscan, rank {me}");
            }
        });
    }
}

#[test]
fn reduce_scatter_blocks_land_reduced_on_their_ranks_in_place_or_not() {
    for n in 1..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for per in [0, 1, 3, 2049] {
                // Rank me's element i of the whole vector (n blocks of per).
                let (mine, sum) = mine_and_sum(n, me, n * per);
                let want = &sum[me * per..(me + 1) * per];
                let mut out = vec![0u8; per * 8];
                reduce_scatter_block(c, Dtype::I64, Op::Sum, Some(&i64s(&mine)), &mut out).unwrap();
                assert_eq!(as_i64s(&out), want, "{n} ranks, {per} per rank");
                let mut inplace = i64s(&mine);
                reduce_scatter_block(c, Dtype::I64, Op::Sum, None, &mut inplace).unwrap();
                assert_eq!(&as_i64s(&inplace)[..per], want, "in place, {n} ranks");
            }
        });
    }
}

#[test]
fn block_collectives_move_every_block_to_its_place() {
    for n in 1..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for blk in [0, 5, 70_000] {
                let byte = |from: usize, to: usize, i: usize| (from * 31 + to * 7 + i) as u8;
                let own: Vec<u8> = (0..blk).map(|i| byte(me, 0, i)).collect();
                let mut all = vec![0u8; n * blk];
                allgather(c, Some(&own), &mut all).unwrap();
                for r in 0..n {
                    assert!(
                        (0..blk).all(|i| all[r * blk + i] == byte(r, 0, i)),
                        "allgather {blk}"
                    );
                }
                let mut inplace = vec![0u8; n * blk];
                inplace[me * blk..(me + 1) * blk].copy_from_slice(&own);
                allgather(c, None, &mut inplace).unwrap();
                assert_eq!(inplace, all, "allgather in place {blk}");
                let send: Vec<u8> = (0..n * blk)
                    .map(|k| byte(me, k / blk.max(1), k % blk.max(1)))
                    .collect();
                let mut got = vec![0u8; n * blk];
                alltoall(c, &send, &mut got).unwrap();
                for r in 0..n {
                    assert!(
                        (0..blk).all(|i| got[r * blk + i] == byte(r, me, i)),
                        "alltoall {blk}"
                    );
                }
                for root in 0..n {
                    let mut at_root = vec![0u8; if me == root { n * blk } else { 0 }];
                    gather(c, &own, &mut at_root, root).unwrap();
                    if me == root {
                        assert_eq!(at_root, all, "gather {blk} to {root}");
                    }
                    let mut mine = vec![0u8; blk];
                    let from = if me == root { send.clone() } else { Vec::new() };
                    scatter(c, &from, &mut mine, root).unwrap();
                    assert!(
                        (0..blk).all(|i| mine[i] == byte(root, me, i)),
                        "scatter {blk}"
                    );
                }
            }
        });
    }
}

/// Rank r's block for rank d in the v tests: (r + 2d) % 5 bytes (some
/// empty), each byte naming both.
fn vblock(r: usize, d: usize) -> Vec<u8> {
    (0..(r + 2 * d) % 5)
        .map(|i| (r * 16 + d * 4 + i) as u8)
        .collect()
}

/// A block table for blocks of `lens`, laid out in reverse rank order with
/// a gap of 3 bytes before each: (table, buffer bytes).
fn reversed(lens: &[usize]) -> ((Vec<usize>, Vec<usize>), usize) {
    let mut displs = vec![0; lens.len()];
    let mut at = 0;
    for j in (0..lens.len()).rev() {
        at += 3;
        displs[j] = at;
        at += lens[j];
    }
    ((lens.to_vec(), displs), at)
}

#[test]
fn v_collectives_place_uneven_blocks_at_their_offsets() {
    for n in 1..=4 {
        job(n, |c| {
            let (n, me) = (c.size(), c.rank());
            for root in 0..n {
                // Gatherv: rank r sends vblock(r, root).
                let lens: Vec<usize> = (0..n).map(|r| vblock(r, root).len()).collect();
                let ((l, d), total) = reversed(&lens);
                let b = Blocks {
                    lens: &l,
                    displs: &d,
                };
                let mut all = vec![0xeeu8; if me == root { total } else { 0 }];
                let table = (me == root).then_some(b);
                gatherv(c, &vblock(me, root), &mut all, table, root).unwrap();
                if me == root {
                    for r in 0..n {
                        assert_eq!(
                            &all[d[r]..d[r] + l[r]],
                            vblock(r, root),
                            "gatherv {n}/{root}/{r}"
                        );
                        assert_eq!(all[d[r] - 3..d[r]], [0xee; 3], "gap before block {r}");
                    }
                }
                // Scatterv: the root sends vblock(root, r) to rank r.
                let lens: Vec<usize> = (0..n).map(|r| vblock(root, r).len()).collect();
                let ((l, d), total) = reversed(&lens);
                let mut src = vec![0u8; total];
                for r in 0..n {
                    src[d[r]..d[r] + l[r]].copy_from_slice(&vblock(root, r));
                }
                let b = Blocks {
                    lens: &l,
                    displs: &d,
                };
                let mut got = vec![0u8; vblock(root, me).len()];
                let table = (me == root).then_some(b);
                let send = if me == root { &src[..] } else { &[][..] };
                scatterv(c, send, table, &mut got, root).unwrap();
                assert_eq!(got, vblock(root, me), "scatterv {n}/{root}");
            }
            // Allgatherv: rank r's block vblock(r, 0), in place or not.
            let lens: Vec<usize> = (0..n).map(|r| vblock(r, 0).len()).collect();
            let ((l, d), total) = reversed(&lens);
            let b = Blocks {
                lens: &l,
                displs: &d,
            };
            let mut all = vec![0u8; total];
            allgatherv(c, Some(&vblock(me, 0)), &mut all, b).unwrap();
            let mut inplace = vec![0u8; total];
            inplace[d[me]..d[me] + l[me]].copy_from_slice(&vblock(me, 0));
            allgatherv(c, None, &mut inplace, b).unwrap();
            for r in 0..n {
                assert_eq!(&all[d[r]..d[r] + l[r]], vblock(r, 0), "allgatherv {n}/{r}");
                assert_eq!(
                    &inplace[d[r]..d[r] + l[r]],
                    vblock(r, 0),
                    "in place {n}/{r}"
                );
            }
            // Alltoallv: rank r sends vblock(r, d) to rank d.
            let slens: Vec<usize> = (0..n).map(|d| vblock(me, d).len()).collect();
            let ((sl, sd), stotal) = reversed(&slens);
            let mut send = vec![0u8; stotal];
            for d in 0..n {
                send[sd[d]..sd[d] + sl[d]].copy_from_slice(&vblock(me, d));
            }
            let rlens: Vec<usize> = (0..n).map(|r| vblock(r, me).len()).collect();
            let ((rl, rd), rtotal) = reversed(&rlens);
            let mut recv = vec![0u8; rtotal];
            let (sb, rb) = (
                Blocks {
                    lens: &sl,
                    displs: &sd,
                },
                Blocks {
                    lens: &rl,
                    displs: &rd,
                },
            );
            alltoallv(c, &send, sb, &mut recv, rb).unwrap();
            for r in 0..n {
                assert_eq!(
                    &recv[rd[r]..rd[r] + rl[r]],
                    vblock(r, me),
                    "alltoallv {n}/{r}"
                );
            }
        });
    }
}

#[test]
fn v_tables_that_do_not_fit_are_refused_naming_the_block() {
    job(2, |c| {
        let me = c.rank();
        let b = |l: &'static [usize], d: &'static [usize]| Blocks { lens: l, displs: d };
        let e = allgatherv(c, Some(&[0u8; 4]), &mut [0u8; 6], b(&[4, 4], &[0, 2]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("blocks 0 and 1 overlap"), "{e}");
        let e = allgatherv(c, Some(&[0u8; 4]), &mut [0u8; 8], b(&[4, 4], &[0, 5]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("block 1 (4 bytes from byte 5) ends beyond the buffer's 8 bytes"),
            "{e}"
        );
        let e = alltoallv(
            c,
            &[0u8; 8],
            b(&[4], &[0]),
            &mut [0u8; 8],
            b(&[4, 4], &[0, 4]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("the send blocks: 1 lengths and 1 offsets for 2 ranks"),
            "{e}"
        );
        if me == 0 {
            let e = gatherv(c, &[1u8], &mut [0u8; 4], None, 0)
                .unwrap_err()
                .to_string();
            assert!(e.contains("the root has no block table"), "{e}");
        }
        // Blocks that may overlap when only read: a scatterv of one byte to both.
        let mut got = [0u8; 1];
        let send = if me == 1 { &[9u8][..] } else { &[][..] };
        scatterv(
            c,
            send,
            (me == 1).then_some(b(&[1, 1], &[0, 0])),
            &mut got,
            1,
        )
        .unwrap();
        assert_eq!(got, [9]);
        // Ranks whose tables disagree on a length: the receiver says so.
        let mut all = [0u8; 4];
        let table = if me == 0 {
            b(&[1, 2], &[0, 2])
        } else {
            b(&[1, 1], &[0, 2])
        };
        let e = allgatherv(c, Some(&[me as u8]), &mut all, table);
        if me == 0 {
            let e = e.unwrap_err().to_string();
            assert!(
                e.contains("of 1 bytes from rank 1 where 2 were expected"),
                "{e}"
            );
        } else {
            e.unwrap();
        }
        // Still in step afterwards.
        let mut x = [me as u8];
        bcast(c, &mut x, 1).unwrap();
        assert_eq!(x, [1]);
    });
}

#[test]
fn bad_arguments_are_refused_with_what_was_expected() {
    job(2, |c| {
        let e = bcast(c, &mut [0u8; 4], 2).unwrap_err().to_string();
        assert!(
            e.contains("root rank 2 is out of range (job of 2 ranks)"),
            "{e}"
        );
        let e = allreduce(c, Dtype::F64, Op::Sum, Some(&[0u8; 12]), &mut [0u8; 12])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a whole number of 8-byte elements"), "{e}");
        let e = allreduce(c, Dtype::F64, Op::Sum, Some(&[0u8; 16]), &mut [0u8; 8])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the receive buffer holds 8 bytes where 16 are needed"),
            "{e}"
        );
        let e = allgather(c, None, &mut [0u8; 5]).unwrap_err().to_string();
        assert!(e.contains("not 2 equal blocks"), "{e}");
        let e = reduce_scatter_block(c, Dtype::I32, Op::Sum, Some(&[0u8; 12]), &mut [0u8; 4])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the send buffer holds 12 bytes where 8 are needed"),
            "{e}"
        );
        let e = reduce_scatter_block(c, Dtype::I32, Op::Sum, None, &mut [0u8; 13])
            .unwrap_err()
            .to_string();
        assert!(e.contains("13 bytes are not 2 equal blocks"), "{e}");
        let e = reduce_scatter_block(c, Dtype::F64, Op::Sum, Some(&[0u8; 8]), &mut [0u8; 4])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a block holds 4 bytes, not a whole number"),
            "{e}"
        );
        let e = scan(c, Dtype::F64, Op::Sum, Some(&[0u8; 16]), &mut [0u8; 8])
            .unwrap_err()
            .to_string();
        assert!(e.contains("where 16 are needed"), "{e}");
        if c.rank() == 1 {
            let e = reduce(c, Dtype::I32, Op::Sum, None, &mut [0u8; 4], 0)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("in place (no send buffer) only at the root"),
                "{e}"
            );
        }
        // Ranks that disagree on a size: the receiver says so, no garbage.
        let mut b = vec![0u8; 8 + 8 * c.rank()];
        let e = bcast(c, &mut b, 0);
        if c.rank() == 1 {
            let e = e.unwrap_err().to_string();
            assert!(
                e.contains("of 8 bytes from rank 0 where 16 were expected"),
                "{e}"
            );
        }
        // Still in step afterwards.
        let mut x = [c.rank() as u8];
        bcast(c, &mut x, 1).unwrap();
        assert_eq!(x, [1]);
    });
}

/// `combine` (vectorized, one loop per type and operation) against the
/// definition written element by element, on 37 elements (vector bodies
/// and a tail) of every type and operation, with wrapping integers, zeros
/// of both signs and NaNs, which pin the operand order of min and max.
#[test]
fn combine_matches_its_element_by_element_definition() {
    fn check<T: Copy + PartialOrd + std::fmt::Debug, const S: usize>(
        dt: Dtype,
        vals: &[T],
        bytes: fn(T) -> [u8; S],
        sum: fn(T, T) -> T,
        prod: fn(T, T) -> T,
    ) {
        let x: Vec<T> = (0..37).map(|i| vals[i % vals.len()]).collect();
        let y: Vec<T> = (0..37).map(|i| vals[(i * 7 + 3) % vals.len()]).collect();
        let flat = |v: &[T]| v.iter().flat_map(|&e| bytes(e)).collect::<Vec<u8>>();
        for (op, f) in [
            (Op::Sum, sum),
            (Op::Prod, prod),
            (Op::Min, min as fn(T, T) -> T),
            (Op::Max, max as fn(T, T) -> T),
        ] {
            let mut got = flat(&y);
            combine(dt, op, &flat(&x), &mut got);
            let want: Vec<T> = x.iter().zip(&y).map(|(&l, &r)| f(l, r)).collect();
            assert_eq!(got, flat(&want), "{dt:?} {op:?}");
        }
    }
    let ints = [0i64, 1, -1, 7, -300, i64::MAX, i64::MIN, 1 << 40];
    check(
        Dtype::I64,
        &ints,
        i64::to_ne_bytes,
        i64::wrapping_add,
        i64::wrapping_mul,
    );
    let i32s: Vec<i32> = ints.iter().map(|&v| v as i32).collect();
    check(
        Dtype::I32,
        &i32s,
        i32::to_ne_bytes,
        i32::wrapping_add,
        i32::wrapping_mul,
    );
    let u64s: Vec<u64> = ints.iter().map(|&v| v as u64).collect();
    check(
        Dtype::U64,
        &u64s,
        u64::to_ne_bytes,
        u64::wrapping_add,
        u64::wrapping_mul,
    );
    let fl = [
        0.0f64,
        -0.0,
        1.5,
        -2.25,
        f64::NAN,
        1e300,
        -7.0,
        f64::INFINITY,
    ];
    check(
        Dtype::F64,
        &fl,
        f64::to_ne_bytes,
        |l, r| l + r,
        |l, r| l * r,
    );
    let f32s: Vec<f32> = fl.iter().map(|&v| v as f32).collect();
    check(
        Dtype::F32,
        &f32s,
        f32::to_ne_bytes,
        |l, r| l + r,
        |l, r| l * r,
    );
}
