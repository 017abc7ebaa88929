//! A row with far more fields than the relation has columns is rejected without holding
//! its fields: the memory the parser takes stays bounded whatever the line's length.
//!
//! A test executable of its own, outside `tests/it`: the counting allocator measures every
//! allocation of the process, so no other test may run beside it.

use fox_kernel::InputRel;
use fox_runtime::load::{parse_input, Interner};
use fox_sema::core::{Column, Type};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the bytes allocated and not yet freed, and their peak.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn a_line_of_millions_of_fields_is_rejected_in_bounded_memory() {
    let fields = 3_000_000;
    for sep in [",", "|"] {
        let line = sep.repeat(fields - 1);
        let input = InputRel {
            name: "r".into(),
            columns: vec![
                Column {
                    name: "x".into(),
                    ty: Type::Int32,
                },
                Column {
                    name: "y".into(),
                    ty: Type::Int32,
                },
            ],
            file: "r.csv".into(),
            sep: sep.into(),
            key: Vec::new(),
            header: false,
        };
        let before = NOW.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let mut strings = Interner::default();
        let e = parse_input(&line, "r.csv", &input, &mut strings)
            .unwrap_err()
            .to_string();
        let extra = PEAK.load(Ordering::Relaxed) - before;
        assert_eq!(
            e,
            format!("r.csv:1: expected 2 fields (the columns of `r`), found {fields}")
        );
        // Holding a reference to every field would take 24 bytes each (72 MB).
        assert!(extra < 1 << 20, "sep {sep:?}: {extra} bytes allocated while parsing");
    }
}
