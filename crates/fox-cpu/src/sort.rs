//! Sorting: the stable permutation of `SortPerm`, and `AdjacentDistinct`.

use crate::util::{as_u32, check_u32_rows, common_len, elem_name, f64_key, par_map, KResult, PAR_MIN};
use fox_runtime::HostCol;
use rayon::prelude::*;
use std::cmp::Ordering;

/// One key column as order-preserving unsigned integers of `bits` bits.
struct Key {
    v: Vec<u64>,
    bits: u32,
}

fn encode(col: &HostCol, desc: bool, rank: Option<&[u32]>, k: usize) -> KResult<Key> {
    let (v, bits): (Vec<u64>, u32) = match (col, rank) {
        (HostCol::U32(v), Some(rank)) => {
            let mut out = Vec::with_capacity(v.len());
            for (row, &code) in v.iter().enumerate() {
                let Some(&r) = rank.get(code as usize) else {
                    return Err(format!(
                        "string code {code} of key {k} at row {row} is outside the rank table ({} entries)",
                        rank.len()
                    ));
                };
                out.push(u64::from(r));
            }
            (out, 32)
        }
        (other, Some(_)) => {
            return Err(format!(
                "key {k} is ordered by string rank but is {}, not a string code column",
                elem_name(other.elem())
            ))
        }
        (HostCol::U8(v), None) => (v.iter().map(|&x| u64::from(x)).collect(), 8),
        (HostCol::I32(v), None) => (v.iter().map(|&x| u64::from(x as u32 ^ 0x8000_0000)).collect(), 32),
        (HostCol::U32(v), None) => (v.iter().map(|&x| u64::from(x)).collect(), 32),
        (HostCol::I64(v), None) => (v.iter().map(|&x| x as u64 ^ (1 << 63)).collect(), 64),
        (HostCol::U64(v), None) => (v.clone(), 64),
        (HostCol::F64(v), None) => (v.iter().map(|&x| f64_key(x)).collect(), 64),
    };
    let v = if desc {
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        v.into_iter().map(|x| !x & mask).collect()
    } else {
        v
    };
    Ok(Key { v, bits })
}

fn sort_pairs<K: Ord + Copy + Send>(mut pairs: Vec<(K, u32)>) -> Vec<u32> {
    if pairs.len() < PAR_MIN {
        pairs.sort_unstable();
    } else {
        pairs.par_sort_unstable();
    }
    pairs.into_iter().map(|(_, i)| i).collect()
}

/// `SortPerm { desc, by_rank }`: args k key columns, then the `Rank` table if any key
/// is by rank. The stable permutation ordering the rows by the keys.
pub(crate) fn sort_perm(args: &[&HostCol], desc: &[bool], by_rank: &[bool]) -> KResult<HostCol> {
    let k = desc.len();
    if by_rank.len() != k {
        return Err(format!("has {k} desc flags but {} by_rank flags", by_rank.len()));
    }
    let need_rank = by_rank.iter().any(|b| *b);
    let want = k + usize::from(need_rank);
    if args.len() != want {
        return Err(format!(
            "expects {k} key column(s){}, got {} arguments",
            if need_rank { " and the rank table" } else { "" },
            args.len()
        ));
    }
    let rank = if need_rank {
        Some(as_u32(args[k], "the rank table")?)
    } else {
        None
    };
    let n = common_len(&args[..k], "keys")?;
    check_u32_rows(n, "the input")?;
    let keys = (0..k)
        .map(|i| encode(args[i], desc[i], if by_rank[i] { rank } else { None }, i))
        .collect::<KResult<Vec<_>>>()?;
    let total_bits: u32 = keys.iter().map(|k| k.bits).sum();
    let perm = if total_bits <= 64 {
        let pairs = par_map(n, |i| {
            let mut p = 0u64;
            for key in &keys {
                p = if key.bits == 64 {
                    key.v[i]
                } else {
                    (p << key.bits) | key.v[i]
                };
            }
            (p, i as u32)
        });
        sort_pairs(pairs)
    } else if total_bits <= 128 {
        let pairs = par_map(n, |i| {
            let mut p = 0u128;
            for key in &keys {
                p = (p << key.bits) | u128::from(key.v[i]);
            }
            (p, i as u32)
        });
        sort_pairs(pairs)
    } else {
        let mut idx: Vec<u32> = (0..n as u32).collect();
        let cmp = |a: &u32, b: &u32| {
            for key in &keys {
                match key.v[*a as usize].cmp(&key.v[*b as usize]) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            Ordering::Equal
        };
        if n < PAR_MIN {
            idx.sort_by(cmp);
        } else {
            idx.par_sort_by(cmp);
        }
        idx
    };
    Ok(HostCol::U32(perm))
}

/// `AdjacentDistinct`: 1 where row i differs from row i-1 in any column (row 0: 1).
pub(crate) fn adjacent_distinct(args: &[&HostCol]) -> KResult<HostCol> {
    let n = common_len(args, "columns")?;
    Ok(HostCol::U8(par_map(n, |i| {
        u8::from(
            i == 0
                || args
                    .iter()
                    .any(|c| crate::util::cmp_at(c, i, c, i - 1) != Ordering::Equal),
        )
    })))
}
