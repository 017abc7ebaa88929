//! The shared writer of output files: regular files replaced whole, links kept, devices
//! and FIFOs written in place (never replaced), several files all or nothing.

use fox_runtime::{write_bytes, OutputFiles};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fox-outfile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The names in `dir`, sorted (temporaries start with a dot).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo failed");
}

#[test]
fn regular_files_are_replaced_whole_keeping_their_permissions() {
    let dir = temp_dir("regular");
    let p = dir.join("plan.ron");
    write_bytes(&p, b"first\n").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "first\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_bytes(&p, b"second\n").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "second\n");
    assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o640);
    assert_eq!(names(&dir), ["plan.ron"]);
    // A failing content leaves the old file and no temporary.
    let e = fox_runtime::write_file(&p, |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("the content failed"))
    })
    .unwrap_err();
    assert!(e.to_string().contains("the content failed"), "{e}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "second\n");
    assert_eq!(names(&dir), ["plan.ron"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_symlink_stays_a_link_and_its_target_is_written() {
    let dir = temp_dir("symlink");
    std::fs::create_dir(dir.join("real")).unwrap();
    std::fs::write(dir.join("real/target.csv"), "old\n").unwrap();
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink("real/target.csv", &link).unwrap();
    write_bytes(&link, b"new\n").unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(dir.join("real/target.csv")).unwrap(), "new\n");
    assert_eq!(names(&dir.join("real")), ["target.csv"]);
    // A dangling link: its target is created, the link kept.
    let dangling = dir.join("dangling.csv");
    std::os::unix::fs::symlink("real/created.csv", &dangling).unwrap();
    write_bytes(&dangling, b"made\n").unwrap();
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(dir.join("real/created.csv")).unwrap(), "made\n");
    assert_eq!(names(&dir), ["dangling.csv", "link.csv", "real"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fifo_is_written_in_place_and_stays_a_fifo() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("out.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    write_bytes(&fifo, b"through the pipe\n").unwrap();
    assert_eq!(reader.join().unwrap(), "through the pipe\n");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(names(&dir), ["out.fifo"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_device_is_an_error_and_stays_a_device() {
    let full = Path::new("/dev/full");
    if !std::fs::metadata(full).is_ok_and(|m| m.file_type().is_char_device()) {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let e = write_bytes(full, b"x").unwrap_err();
    assert_eq!(e.error.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert!(e.to_string().starts_with("cannot write `/dev/full`: "), "{e}");
    // Through a link, in a set of files: nothing of the set is written.
    let dir = temp_dir("full");
    let link = dir.join("b.csv");
    std::os::unix::fs::symlink(full, &link).unwrap();
    let mut files = OutputFiles::new();
    files.add(dir.join("a.csv"), |w| w.write_all(b"a\n"));
    files.add(&link, |w| w.write_all(&vec![b'x'; 1 << 21]));
    files.add(dir.join("c.csv"), |w| w.write_all(b"c\n"));
    let e = files.commit().unwrap_err();
    assert_eq!(e.path, link);
    assert_eq!(e.error.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert_eq!(names(&dir), ["b.csv"]);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::metadata(full).unwrap().file_type().is_char_device());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_set_of_files_is_written_all_or_nothing() {
    let dir = temp_dir("set");
    // A directory in the way fails before anything is written.
    std::fs::create_dir(dir.join("revenue.csv")).unwrap();
    let mut files = OutputFiles::new();
    files.add(dir.join("path.csv"), |w| w.write_all(b"x,y\n1,2\n"));
    files.add(dir.join("revenue.csv"), |w| w.write_all(b"r\n"));
    let e = files.commit().unwrap_err();
    assert!(
        e.to_string().contains("revenue.csv") && e.to_string().contains("directory"),
        "{e}"
    );
    assert_eq!(names(&dir), ["revenue.csv"]);
    // A file that fails after another was written: the other's temporary is removed.
    let mut files = OutputFiles::new();
    files.add(dir.join("path.csv"), |w| w.write_all(b"x,y\n1,2\n"));
    files.add(dir.join("missing/late.csv"), |w| w.write_all(b"late\n"));
    let e = files.commit().unwrap_err();
    assert!(e.to_string().contains("late.csv"), "{e}");
    assert_eq!(names(&dir), ["revenue.csv"]);
    // A content that fails after others: nothing is written.
    let mut files = OutputFiles::new();
    files.add(dir.join("path.csv"), |w| w.write_all(b"x,y\n1,2\n"));
    files.add(dir.join("third.csv"), |_| Err(std::io::Error::other("cannot format")));
    assert!(files.commit().is_err());
    assert_eq!(names(&dir), ["revenue.csv"]);
    // All good: all written.
    let mut files = OutputFiles::new();
    files.add(dir.join("path.csv"), |w| w.write_all(b"x,y\n1,2\n"));
    files.add(dir.join("third.csv"), |w| w.write_all(b"t\n"));
    files.commit().unwrap();
    assert_eq!(names(&dir), ["path.csv", "revenue.csv", "third.csv"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_all_removes_a_directory_it_created_when_it_fails() {
    let dir = temp_dir("write-all");
    let out = dir.join("out");
    let t = fox_runtime::OutputTable::from_rows(
        "t",
        vec![fox_sema::core::Column {
            name: "x".into(),
            ty: fox_sema::core::Type::Int32,
        }],
        vec![vec![fox_sema::core::Value::Int32(1)]],
    );
    let mut bad = t.clone();
    bad.name = "sub/t".into();
    assert!(fox_runtime::write_all(&[t.clone(), bad], &out, fox_runtime::Format::Csv).is_err());
    assert!(!out.exists());
    let written = fox_runtime::write_all(&[t], &out, fox_runtime::Format::Tsv).unwrap();
    assert_eq!(written, vec![(out.join("t.tsv"), 1)]);
    assert_eq!(std::fs::read_to_string(out.join("t.tsv")).unwrap(), "x\n1\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
