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
