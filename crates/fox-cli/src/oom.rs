//! The binaries' global allocator: the system's, except that an allocation failure no
//! caller handles ends the process with a message and exit status 1 instead of Rust's
//! abort (`memory allocation of N bytes failed`, SIGABRT).
//!
//! Buffers whose size comes from the data are allocated fallibly (see
//! `fox_runtime::alloc`) and their failures are reported by their callers, naming what
//! was being built; those are let through (the allocator returns null to them). Any
//! other allocation that fails, a small one once memory is exhausted, ends the process
//! here.

use std::alloc::{GlobalAlloc, Layout, System};

/// The allocator; `tool` prefixes its message (`foxrun: error: out of memory …`).
pub struct ExitOnOutOfMemory {
    pub tool: &'static str,
}

/// Declares [`ExitOnOutOfMemory`] the global allocator of a binary named `$tool`.
#[macro_export]
macro_rules! exit_on_out_of_memory {
    ($tool:literal) => {
        #[global_allocator]
        static GLOBAL_ALLOCATOR: $crate::oom::ExitOnOutOfMemory = $crate::oom::ExitOnOutOfMemory { tool: $tool };
    };
}

impl ExitOnOutOfMemory {
    /// Called when the system refused `size` bytes: returns when the caller handles the
    /// failure, otherwise writes the message (without allocating) and exits with status 1.
    #[cold]
    fn failed(&self, size: usize) {
        if fox_runtime::alloc::failure_is_handled() {
            return;
        }
        let mut digits = [0u8; 20];
        let mut k = digits.len();
        let mut x = size;
        loop {
            k -= 1;
            digits[k] = b'0' + (x % 10) as u8;
            x /= 10;
            if x == 0 {
                break;
            }
        }
        let parts: [&[u8]; 4] = [
            self.tool.as_bytes(),
            b": error: out of memory: an allocation of ",
            &digits[k..],
            b" bytes failed\n",
        ];
        #[cfg(unix)]
        // SAFETY: `write` of live byte slices to descriptor 2, then `_exit`, which ends the
        // process without running anything that could allocate.
        unsafe {
            for p in parts {
                libc::write(2, p.as_ptr().cast(), p.len());
            }
            libc::_exit(1);
        }
        #[cfg(not(unix))]
        {
            let _ = parts;
            std::process::exit(1);
        }
    }
}

// SAFETY: every method forwards to `System` with the same arguments and returns its
// result unchanged; `failed` either returns or ends the process.
unsafe impl GlobalAlloc for ExitOnOutOfMemory {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if p.is_null() {
            self.failed(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            self.failed(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            self.failed(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}
