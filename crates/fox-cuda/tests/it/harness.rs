//! The harness's own invariants: every source file of this executable is a listed module,
//! none relies on `#[test]`, which a `harness = false` executable drops silently, and a GPU
//! test is reported as ignored without a GPU, fails when the GPU is required, and runs
//! where there is one.

use fox_cuda::testing::check_gpu_test_reporting;
use std::path::PathBuf;

fn sources() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).expect("tests/it") {
        let p = e.expect("a directory entry").path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read_to_string(&p).expect("a test source")));
        }
    }
    out.sort();
    out
}

fn every_source_file_is_a_listed_module() {
    let listed: Vec<&str> = crate::MODULES.iter().map(|(m, _)| *m).collect();
    let files: Vec<String> = sources().into_iter().map(|(n, _)| n).filter(|n| n != "main").collect();
    assert_eq!(files, listed, "tests/it/*.rs and the modules of main.rs differ");
    for (module, tests) in crate::MODULES {
        assert!(!tests.is_empty(), "{module} lists no test");
    }
}

fn no_test_attributes() {
    for (name, text) in sources() {
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.trim_start().starts_with("#[test]"),
                "tests/it/{name}.rs:{}: `#[test]` does nothing here; list the function in `tests![…]`",
                i + 1
            );
        }
    }
}

fn gpu_tests_are_ignored_without_a_gpu_and_fail_when_it_is_required() {
    let exe = std::env::current_exe().expect("the test executable");
    check_gpu_test_reporting(&exe, "trie::sorted_search_rejects_ranges_outside_the_values");
}

tests![
    Cpu every_source_file_is_a_listed_module,
    Cpu no_test_attributes,
    Cpu gpu_tests_are_ignored_without_a_gpu_and_fail_when_it_is_required,
];
