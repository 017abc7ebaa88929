//! The exchange kernel's contract: its signature, and the hash that places rows on
//! devices, which every backend and every run must compute alike.

use fox_kernel::{device_of, kernel_outputs, row_hash, value_bits_f64, value_bits_i32, Elem, Exchange, Kernel};

#[test]
fn an_exchange_keeps_its_columns_element_types() {
    let k = Kernel::Exchange {
        width: 2,
        to: Exchange::Hash { cols: vec![1] },
    };
    assert_eq!(
        kernel_outputs(&k, &[Elem::I32, Elem::U32], &[]).unwrap(),
        vec![Elem::I32, Elem::U32]
    );
    assert!(kernel_outputs(&k, &[Elem::I32], &[]).is_err(), "one column for two");
    let bad = Kernel::Exchange {
        width: 2,
        to: Exchange::Keep { cols: vec![2] },
    };
    let e = kernel_outputs(&bad, &[Elem::I32, Elem::I32], &[]).unwrap_err();
    assert!(e.contains("column 2 of 2"), "{e}");
    let none = Kernel::Exchange {
        width: 0,
        to: Exchange::Gather,
    };
    assert!(kernel_outputs(&none, &[], &[]).is_err());
}

#[test]
fn the_row_hash_is_pinned_and_spreads_rows_evenly() {
    // Pinned: plans and results of several devices must not change with a build.
    assert_eq!(row_hash([1u64]), row_hash([1u64]));
    assert_ne!(row_hash([1u64, 2]), row_hash([2u64, 1]));
    assert_eq!(row_hash([value_bits_i32(-1)]), row_hash([u64::MAX]));
    assert_eq!(value_bits_f64(-0.0), value_bits_f64(0.0));
    assert_eq!(row_hash(std::iter::empty()), 0x243F_6A88_85A3_08D3);
    for devices in [1usize, 2, 3, 4, 8] {
        let mut counts = vec![0usize; devices];
        for v in 0..100_000u64 {
            let d = device_of(row_hash([v]), devices);
            assert!(d < devices);
            counts[d] += 1;
        }
        let expect = 100_000 / devices;
        for c in counts {
            assert!(
                c.abs_diff(expect) < expect / 20,
                "{devices} devices: {c} rows, expected about {expect}"
            );
        }
    }
    assert_eq!(device_of(u64::MAX, 1), 0);
    assert_eq!(device_of(u64::MAX, 4), 3);
    assert_eq!(device_of(0, 4), 0);
}

/// The kernel plan of `src` planned for `devices` devices, printed.
fn printed_on(src: &str, devices: usize) -> String {
    let (ast, diags) = fox_syntax::parse(src);
    assert!(diags.iter().all(|d| !d.is_error()));
    let (core, _) = fox_sema::check(&ast);
    let ra = fox_ra::plan(&core.unwrap()).unwrap();
    let opts = fox_phys::Options {
        devices,
        ..fox_phys::Options::default()
    };
    let phys = fox_phys::run(ra, &fox_phys::Statistics::none(), &opts).unwrap();
    let plan = fox_kernel::lower_physical_with(&phys, &fox_kernel::LowerOptions::default()).unwrap();
    fox_kernel::validate(&plan).unwrap();
    fox_kernel::print_kernels(&plan)
}

/// An average of integers or decimals over several devices: each device sums its values
/// as 128-bit decimals and counts its rows, only those partial rows move (hashed on the
/// group), they are summed again, and the average is the sum over the count; no kernel
/// averages. An average of floats is not split: its input moves, and one kernel averages.
#[test]
fn an_average_moves_partial_sums_and_counts() {
    let src = |ty: &str| {
        // `f`, derived and output, is hashed on both its columns: not placed by the groups
        // (an input would be loaded hashed on them, and nothing would move; a relation
        // whose readers all group on `x` would be hashed on `x`: `b` groups on `y`).
        format!(
            "e(x, y) -> int32(x), {ty}(y).\n.input e.\nf(x, y) <- e(x, y), x != 0.\n\
             a[x] = v <- agg<<v = avg(y)>> f(x, y).\nb[y] = c <- agg<<c = count()>> f(_, y).\n\
             .output a.\n.output b.\n.output f.\n"
        )
    };
    for (ty, sum) in [
        ("int32", "sum(decimal(0)) -> decimal38(0)"),
        ("int64", "sum(decimal(0)) -> decimal38(0)"),
        ("decimal", "sum(decimal(2)) -> decimal38(2)"),
    ] {
        let k = printed_on(&src(ty), 2);
        assert!(!k.contains("avg("), "{ty}:\n{k}");
        let reduce = k
            .lines()
            .position(|l| l.contains(sum) && l.contains("count() -> int64"));
        let moved = k
            .lines()
            .position(|l| l.contains("= exchange[hash #0]") && l.contains(".sum") && l.contains("avg.count"));
        let again = k
            .lines()
            .position(|l| l.contains("reduce_by_key[1 key; sum(decimal38(") && l.contains("sum(int64) -> int64"));
        let divided = k
            .lines()
            .position(|l| l.contains("= eval[") && l.contains(".sum") && l.contains(" / "));
        match (reduce, moved, again, divided) {
            (Some(a), Some(b), Some(c), Some(d)) => assert!(a < b && b < c && c < d, "{ty}:\n{k}"),
            _ => panic!("{ty}:\n{k}"),
        }
        // On one device the average is one kernel's.
        assert!(printed_on(&src(ty), 1).contains("avg("), "{ty}");
    }
    let k = printed_on(&src("float64"), 2);
    assert!(k.contains("avg(") && !k.contains("avg.count"), "{k}");
}
