//! Writing output files: every file a Fox tool writes goes through [`write_file`] or,
//! for several files that are promised together, [`OutputFiles`].
//!
//! What happens depends on what the path is:
//! - a regular file, or nothing yet: the content is written to a temporary file beside it
//!   (registered with [`crate::tempfiles`], so a signal removes it), flushed to disk, and
//!   renamed over the path only when complete; a replaced file keeps its permissions;
//! - a symbolic link: its target (followed link by link) is written as above, and the
//!   link stays a link;
//! - a device, a FIFO or a socket: the content is written into it directly, and its
//!   errors are reported (`/dev/full` is "No space left on device"); the node itself is
//!   never replaced;
//! - a directory: an error, and nothing is written.
//!
//! [`OutputFiles::commit`] makes several files all or nothing: every path is resolved
//! first (a directory in the way fails before anything is written), then every temporary
//! is written, then the devices and FIFOs, and only when all of them succeeded are the
//! temporaries renamed into place; on any error every temporary is removed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What writes a file's content: called once, with a buffered writer.
pub type Content<'a> = Box<dyn FnOnce(&mut (dyn Write + Send)) -> io::Result<()> + 'a>;

/// A file that could not be written. The message names the path as the caller gave it.
#[derive(Debug, thiserror::Error)]
#[error("cannot write `{}`: {error}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    pub error: io::Error,
}

impl WriteError {
    fn new(path: &Path, error: io::Error) -> WriteError {
        WriteError {
            path: path.to_path_buf(),
            error,
        }
    }
}

impl From<WriteError> for crate::RuntimeError {
    fn from(e: WriteError) -> Self {
        crate::RuntimeError::Io { msg: e.to_string() }
    }
}

/// Writes one file as the module describes.
pub fn write_file(
    path: &Path,
    content: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>,
) -> Result<(), WriteError> {
    let mut files = OutputFiles::new();
    files.add(path, content);
    files.commit()
}

/// Writes `bytes` to one file as the module describes.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_file(path, |w| w.write_all(bytes))
}

/// Files written together, all or nothing (see the module).
#[derive(Default)]
pub struct OutputFiles<'a> {
    files: Vec<(PathBuf, Content<'a>)>,
}

/// Where a path's content goes.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A regular file or a new one at this path (a symbolic link's final target):
    /// replaced through a temporary, keeping these permissions when it exists.
    Replace(PathBuf, Option<fs::Permissions>),
    /// A device, FIFO or socket, written in place.
    Direct(PathBuf),
}

/// Follows symbolic links from `path` to what the content should go to.
fn resolve(path: &Path) -> io::Result<Target> {
    if path.file_name().is_none() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file name"));
    }
    let mut p = path.to_path_buf();
    // As many links as Linux follows in one path lookup.
    for _ in 0..40 {
        let meta = match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::Replace(p, None)),
            Err(e) => return Err(e),
            Ok(m) => m,
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let link = fs::read_link(&p)?;
            p = match p.parent() {
                Some(dir) if link.is_relative() => dir.join(link),
                _ => link,
            };
            if p.file_name().is_none() {
                // A link to `..` or `/` names a directory.
                return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
            }
        } else if ft.is_file() {
            return Ok(Target::Replace(p, Some(meta.permissions())));
        } else if ft.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
        } else {
            return Ok(Target::Direct(p));
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// A temporary written for a file, removed when dropped unless it was renamed into place.
struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
    renamed: bool,
    _registered: crate::tempfiles::Registered,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Temporaries of this process are numbered so that no two share a name.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Writes the content to a new temporary beside `dest`, flushed to disk.
fn write_temp(dest: &Path, perms: Option<fs::Permissions>, content: Content<'_>) -> io::Result<Staged> {
    let dir = dest
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(
        ".{name}.tmp{}-{}",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let registered = crate::tempfiles::register(&tmp);
    let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let staged = Staged {
        tmp,
        dest: dest.to_path_buf(),
        renamed: false,
        _registered: registered,
    };
    if let Some(p) = perms {
        file.set_permissions(p)?;
    }
    let file = write_through(file, content)?;
    file.sync_all()?;
    Ok(staged)
}

/// Writes the content into `file` through a buffer, and returns the file once flushed.
fn write_through(file: File, content: Content<'_>) -> io::Result<File> {
    let mut w = BufWriter::with_capacity(1 << 20, file);
    content(&mut w)?;
    w.into_inner().map_err(io::IntoInnerError::into_error)
}

impl<'a> OutputFiles<'a> {
    pub fn new() -> OutputFiles<'a> {
        OutputFiles { files: Vec::new() }
    }

    /// Adds a file; `content` is called once, by [`OutputFiles::commit`].
    pub fn add(
        &mut self,
        path: impl Into<PathBuf>,
        content: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()> + 'a,
    ) {
        self.files.push((path.into(), Box::new(content)));
    }

    /// Writes every file, all or nothing (see the module). Renaming the completed
    /// temporaries is the only step after which an error (or a signal) can leave some
    /// files written and not others.
    pub fn commit(self) -> Result<(), WriteError> {
        let mut resolved = Vec::with_capacity(self.files.len());
        for (path, content) in self.files {
            let target = resolve(&path).map_err(|e| WriteError::new(&path, e))?;
            resolved.push((path, target, content));
        }
        let mut staged: Vec<(PathBuf, Staged)> = Vec::new();
        let mut direct = Vec::new();
        for (path, target, content) in resolved {
            match target {
                Target::Replace(dest, perms) => {
                    // On an error, dropping `staged` removes every temporary.
                    let s = write_temp(&dest, perms, content).map_err(|e| WriteError::new(&path, e))?;
                    staged.push((path, s));
                }
                Target::Direct(dest) => direct.push((path, dest, content)),
            }
        }
        for (path, dest, content) in direct {
            OpenOptions::new()
                .write(true)
                .open(&dest)
                .and_then(|f| write_through(f, content))
                .map_err(|e| WriteError::new(&path, e))?;
        }
        for (path, s) in &mut staged {
            fs::rename(&s.tmp, &s.dest).map_err(|e| WriteError::new(path, e))?;
            s.renamed = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_relative_to_their_directory() {
        let dir = std::env::temp_dir().join(format!("fox-outfile-resolve-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink("sub/target", dir.join("link")).unwrap();
        std::os::unix::fs::symlink("../link", dir.join("sub/link2")).unwrap();
        assert_eq!(
            resolve(&dir.join("sub/link2")).unwrap(),
            Target::Replace(dir.join("sub/../sub/target"), None)
        );
        std::os::unix::fs::symlink("loop", dir.join("loop")).unwrap();
        assert!(resolve(&dir.join("loop")).is_err());
        assert!(resolve(&dir.join("sub")).is_err());
        assert!(resolve(Path::new("/")).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
