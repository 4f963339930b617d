//! The file at each end of a stream transfer. The sender's [`FileSource`] reads by offset
//! and checks the file is still the one offered (size and modification time); the
//! receiver's [`PartSink`] writes `DIR/NAME.part` beside `DIR/NAME.part.state`, a one-line
//! record of the offer (`size mtime_ns`) that makes the partial file resumable by the
//! same file: a partial file with a matching state offers its length to the sender, which
//! checks the prefix's SHA-256 before it resumes. On a hash match the part is renamed to
//! `DIR/NAME`; on a mismatch it and its state are removed; on any other failure both are
//! kept for the next try.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use braid_core::file_transfer::{Offer, Sink, Source};
use sha2::{Digest, Sha256};

use super::StreamError;

fn mtime_ns(m: &std::fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// The sender's file.
#[derive(Debug)]
pub struct FileSource {
    path: PathBuf,
    file: File,
    size: u64,
    mtime_ns: u64,
}

impl FileSource {
    /// Opens `path` and describes it as an offer.
    pub fn open(path: &Path) -> Result<(FileSource, Offer), StreamError> {
        let err = |cause| StreamError::File {
            path: path.to_owned(),
            cause,
        };
        let file = File::open(path).map_err(err)?;
        let m = file.metadata().map_err(err)?;
        if !m.is_file() {
            return Err(err(std::io::Error::other("not a regular file")));
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.len() <= braid_core::file_transfer::frame::MAX_NAME)
            .ok_or_else(|| {
                err(std::io::Error::other(
                    "the file name must be UTF-8 and at most 255 bytes",
                ))
            })?
            .to_owned();
        let offer = Offer {
            name,
            size: m.len(),
            mtime_ns: mtime_ns(&m),
        };
        Ok((
            FileSource {
                path: path.to_owned(),
                file,
                size: offer.size,
                mtime_ns: offer.mtime_ns,
            },
            offer,
        ))
    }
}

impl Source for FileSource {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, String> {
        loop {
            match self.file.read_at(buf, offset) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading {}: {e}", self.path.display())),
            }
        }
    }

    fn check(&mut self) -> Result<(), String> {
        let m = std::fs::metadata(&self.path).map_err(|e| {
            format!(
                "{} changed while it was being sent: {e}",
                self.path.display()
            )
        })?;
        if m.len() != self.size || mtime_ns(&m) != self.mtime_ns {
            return Err(format!(
                "{} changed while it was being sent (size {} -> {}, or its modification time moved); send it again once it is still",
                self.path.display(),
                self.size,
                m.len()
            ));
        }
        Ok(())
    }
}

/// The receiver's directory.
#[derive(Debug)]
pub struct PartSink {
    dir: PathBuf,
    file: Option<File>,
    name: String,
    /// Where the file went once its hash matched.
    pub kept: Option<PathBuf>,
}

impl PartSink {
    /// Receives into `dir`, which must be a writable directory.
    pub fn new(dir: &Path) -> Result<PartSink, StreamError> {
        let m = std::fs::metadata(dir).map_err(|cause| StreamError::File {
            path: dir.to_owned(),
            cause,
        })?;
        if !m.is_dir() {
            return Err(StreamError::File {
                path: dir.to_owned(),
                cause: std::io::Error::other("not a directory"),
            });
        }
        Ok(PartSink {
            dir: dir.to_owned(),
            file: None,
            name: String::new(),
            kept: None,
        })
    }

    fn part(&self) -> PathBuf {
        self.dir.join(format!("{}.part", self.name))
    }

    fn state(&self) -> PathBuf {
        self.dir.join(format!("{}.part.state", self.name))
    }

    fn file(&mut self) -> Result<&mut File, String> {
        self.file
            .as_mut()
            .ok_or_else(|| "no file is open".to_owned())
    }
}

/// A name the sender may give: one path component, no dot-dot, not hidden.
fn safe_name(n: &str) -> bool {
    !n.is_empty() && !n.starts_with('.') && !n.contains(['/', '\\', '\0'])
}

fn state_line(o: &Offer) -> String {
    format!("{} {}\n", o.size, o.mtime_ns)
}

impl Sink for PartSink {
    fn open(&mut self, offer: &Offer) -> Result<(u64, Sha256), String> {
        if !safe_name(&offer.name) {
            return Err(format!(
                "refusing the file name '{}': it must be a plain name",
                offer.name
            ));
        }
        self.name = offer.name.clone();
        let (part, state) = (self.part(), self.state());
        let same = std::fs::read_to_string(&state).is_ok_and(|s| s == state_line(offer));
        let io = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&part)
            .map_err(|e| io("creating", &part, e))?;
        let mut h = Sha256::new();
        let mut held = 0u64;
        let len = f.metadata().map_err(|e| io("reading", &part, e))?.len();
        if same && len <= offer.size {
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f.read(&mut buf).map_err(|e| io("reading", &part, e))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
                held += n as u64;
            }
        } else {
            f.set_len(0).map_err(|e| io("truncating", &part, e))?;
            std::fs::write(&state, state_line(offer)).map_err(|e| io("writing", &state, e))?;
        }
        f.seek(SeekFrom::Start(held))
            .map_err(|e| io("seeking", &part, e))?;
        self.file = Some(f);
        Ok((held, h))
    }

    fn restart(&mut self) -> Result<(), String> {
        let part = self.part();
        let f = self.file()?;
        f.set_len(0)
            .and_then(|()| f.seek(SeekFrom::Start(0)).map(|_| ()))
            .map_err(|e| format!("truncating {}: {e}", part.display()))
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let part = self.part();
        self.file()?
            .write_all(bytes)
            .map_err(|e| format!("writing {}: {e}", part.display()))
    }

    fn finish(&mut self, matched: bool) -> Result<(), String> {
        let (part, state) = (self.part(), self.state());
        let f = self.file.take().ok_or("no file is open")?;
        if !matched {
            let _ = std::fs::remove_file(&part);
            let _ = std::fs::remove_file(&state);
            return Ok(());
        }
        f.sync_all()
            .map_err(|e| format!("writing {}: {e}", part.display()))?;
        let to = self.dir.join(&self.name);
        std::fs::rename(&part, &to)
            .map_err(|e| format!("renaming {} to {}: {e}", part.display(), to.display()))?;
        let _ = std::fs::remove_file(&state);
        self.kept = Some(to);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_resumes_only_for_the_same_offer_and_is_renamed_on_a_match() {
        let dir = std::env::temp_dir().join(format!("braid-part-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let offer = Offer {
            name: "a.bin".into(),
            size: 10,
            mtime_ns: 5,
        };
        let mut s = PartSink::new(&dir).unwrap();
        assert_eq!(s.open(&offer).unwrap().0, 0);
        s.write(b"hello").unwrap();
        drop(s);
        let mut s = PartSink::new(&dir).unwrap();
        let (held, h) = s.open(&offer).unwrap();
        assert_eq!(held, 5);
        assert_eq!(h.finalize().as_slice(), Sha256::digest(b"hello").as_slice());
        s.write(b"world").unwrap();
        s.finish(true).unwrap();
        assert_eq!(std::fs::read(dir.join("a.bin")).unwrap(), b"helloworld");
        assert!(!dir.join("a.bin.part").exists() && !dir.join("a.bin.part.state").exists());
        // Another mtime: the part starts again.
        let mut s = PartSink::new(&dir).unwrap();
        s.open(&offer).unwrap();
        s.write(b"abc").unwrap();
        let other = Offer {
            mtime_ns: 6,
            ..offer.clone()
        };
        assert_eq!(PartSink::new(&dir).unwrap().open(&other).unwrap().0, 0);
        let bad = Offer {
            name: "../x".into(),
            ..offer
        };
        assert!(PartSink::new(&dir).unwrap().open(&bad).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
