//! The PFAC pipeline's cache on disk: what the driver compiled for this
//! device, kept between runs so that a later set-up skips the compilation.
//!
//! One file per device and driver:
//! `$XDG_CACHE_HOME/gpucarve/pipeline-<vendor>-<device>-<driver>-<uuid>.bin`
//! (`~/.cache/gpucarve/...` without `XDG_CACHE_HOME`). The file is read
//! only when it is at most [`MAX_CACHE_BYTES`] and its Vulkan header names
//! this very device (vendor, device id, `pipelineCacheUUID`); anything else
//! (missing, unreadable, truncated, corrupt, another device's, too large) is
//! ignored without an error and the pipeline is compiled from SPIR-V, as
//! without a cache. The driver validates the data again. The file is
//! written only when the driver's data changed, atomically (a temporary file
//! in the same folder, then a rename), never over [`MAX_CACHE_BYTES`]; a
//! folder that cannot be written leaves the run as it is, with at most one
//! warning line a process. `--no-gpu-cache` or `GPUCARVE_NO_GPU_CACHE=1`
//! turns the cache off (nothing read, nothing written).
//!
//! This module must never fail a set-up: every error here is a note.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest cache file read or written (the PFAC pipeline's is a few KiB to
/// a few hundred KiB).
pub const MAX_CACHE_BYTES: u64 = 16 << 20;

/// Environment variable that turns the pipeline cache off (`1`).
pub const NO_CACHE_ENV: &str = "GPUCARVE_NO_GPU_CACHE";

/// Set by `--no-gpu-cache`.
static DISABLED: AtomicBool = AtomicBool::new(false);
/// One warning a process about a cache that cannot be written.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Turns the pipeline cache off for this process (`--no-gpu-cache`).
pub fn disable_pipeline_cache() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// The folder of the cache files, or `None` when the cache is off or no
/// folder can be named (no `XDG_CACHE_HOME`, no `HOME`).
pub fn default_cache_dir() -> Option<PathBuf> {
    if DISABLED.load(Ordering::Relaxed)
        || std::env::var_os(NO_CACHE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
    {
        return None;
    }
    cache_dir_from(|k| std::env::var_os(k))
}

/// [`default_cache_dir`] with the environment given (XDG: a relative
/// `XDG_CACHE_HOME` is ignored).
fn cache_dir_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = |k: &str| {
        env(k)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.components().count() > 1)
    };
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("gpucarve"))
}

/// Who the cache data is for: what its Vulkan header must say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub uuid: [u8; 16],
}

impl CacheKey {
    /// `pipeline-<vendor>-<device>-<driver>-<uuid>.bin`, hex digits only.
    pub fn file_name(&self) -> String {
        let uuid: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "pipeline-{:04x}-{:04x}-{:08x}-{uuid}.bin",
            self.vendor_id, self.device_id, self.driver_version
        )
    }

    /// Why `data` is not a pipeline cache of this device (`None`: it is):
    /// the `VkPipelineCacheHeaderVersionOne` header, little-endian: header
    /// size (≥ 32, within the data), version 1, vendor, device, UUID.
    pub fn reject(&self, data: &[u8]) -> Option<String> {
        const HEADER: usize = 32;
        if data.len() < HEADER {
            return Some(format!("{} bytes, shorter than a header", data.len()));
        }
        let word = |i: usize| u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
        let size = word(0) as usize;
        if size < HEADER || size > data.len() {
            return Some(format!("header size {size}"));
        }
        if word(4) != 1 {
            return Some(format!("header version {}", word(4)));
        }
        if word(8) != self.vendor_id || word(12) != self.device_id {
            return Some(format!("made for device {:04x}:{:04x}", word(8), word(12)));
        }
        if data[16..32] != self.uuid {
            return Some("made by another driver (pipeline cache UUID)".into());
        }
        None
    }
}

/// What became of the cache in a set-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// Turned off, or no folder to keep it in.
    Off,
    /// No file yet: the pipeline was compiled.
    Cold,
    /// A file of this many bytes was given to the driver.
    Loaded(usize),
    /// A file was there but not used, and why.
    Ignored(String),
}

/// The cache of one device in one folder.
pub struct PipelineCacheFile {
    pub path: PathBuf,
    pub key: CacheKey,
}

impl PipelineCacheFile {
    pub fn new(dir: &Path, key: CacheKey) -> PipelineCacheFile {
        PipelineCacheFile {
            path: dir.join(key.file_name()),
            key,
        }
    }

    /// The data to start the driver's cache with (empty when none may be
    /// used), and what became of the file.
    pub fn load(&self) -> (Vec<u8>, CacheState) {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return (Vec::new(), CacheState::Cold);
            }
            Err(e) => return (Vec::new(), CacheState::Ignored(format!("unreadable: {e}"))),
        };
        let mut data = Vec::new();
        // Bounded whatever the file claims to be (it may grow meanwhile).
        if let Err(e) = file.take(MAX_CACHE_BYTES + 1).read_to_end(&mut data) {
            return (Vec::new(), CacheState::Ignored(format!("unreadable: {e}")));
        }
        if data.len() as u64 > MAX_CACHE_BYTES {
            return (
                Vec::new(),
                CacheState::Ignored(format!("larger than {} MiB", MAX_CACHE_BYTES >> 20)),
            );
        }
        match self.key.reject(&data) {
            Some(why) => (Vec::new(), CacheState::Ignored(why)),
            None => {
                let n = data.len();
                (data, CacheState::Loaded(n))
            }
        }
    }

    /// Writes `data` (the driver's) when it is a cache of this device,
    /// differs from `loaded` and is not too large: atomically, through a
    /// temporary file renamed over the old one. Returns whether it wrote;
    /// a failure is one warning line a process, never an error.
    pub fn save(&self, data: &[u8], loaded: &[u8]) -> bool {
        if data == loaded || data.len() as u64 > MAX_CACHE_BYTES || self.key.reject(data).is_some()
        {
            return false;
        }
        match self.write(data) {
            Ok(()) => true,
            Err(e) => {
                if !WARNED.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "warning: GPU pipeline cache not saved ({}: {e}); set-ups compile the shader again (--no-gpu-cache silences this)",
                        self.path.display()
                    );
                }
                false
            }
        }
    }

    fn write(&self, data: &[u8]) -> std::io::Result<()> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| std::io::Error::other("no folder"))?;
        std::fs::create_dir_all(dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = dir.join(format!(
            ".{}.{}-{nanos}.tmp",
            self.key.file_name(),
            std::process::id()
        ));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            std::io::Write::write_all(&mut f, data)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CacheKey {
        CacheKey {
            vendor_id: 0x10de,
            device_id: 0x2335,
            driver_version: 0x9100_0000,
            uuid: *b"0123456789abcdef",
        }
    }

    fn header(k: &CacheKey, size: u32, version: u32) -> Vec<u8> {
        let mut d = Vec::new();
        for w in [size, version, k.vendor_id, k.device_id] {
            d.extend_from_slice(&w.to_le_bytes());
        }
        d.extend_from_slice(&k.uuid);
        d.extend_from_slice(b"driver data");
        d
    }

    #[test]
    fn the_header_must_name_this_device() {
        let k = key();
        assert_eq!(k.reject(&header(&k, 32, 1)), None);
        assert!(k.reject(&header(&k, 32, 1)[..31]).is_some());
        assert!(k.reject(&header(&k, 16, 1)).is_some());
        assert!(k.reject(&header(&k, 1 << 20, 1)).is_some());
        assert!(k.reject(&header(&k, 32, 2)).is_some());
        let other = CacheKey {
            device_id: 1,
            ..key()
        };
        assert!(k.reject(&header(&other, 32, 1)).unwrap().contains("device"));
        let driver = CacheKey {
            uuid: [7; 16],
            ..key()
        };
        assert!(k.reject(&header(&driver, 32, 1)).unwrap().contains("UUID"));
        assert!(
            k.file_name()
                .starts_with("pipeline-10de-2335-91000000-3031")
        );
    }

    #[test]
    fn load_and_save_round_trip_and_ignore_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = PipelineCacheFile::new(&dir.path().join("sub"), key());
        assert_eq!(f.load(), (Vec::new(), CacheState::Cold));
        let data = header(&key(), 32, 1);
        assert!(!f.save(b"not a cache at all, long enough to be a header", &[]));
        assert!(f.save(&data, &[]));
        assert!(!f.save(&data, &data), "unchanged: not written again");
        assert_eq!(f.load(), (data.clone(), CacheState::Loaded(data.len())));
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::write(&f.path, b"garbage").unwrap();
        assert!(matches!(f.load(), (d, CacheState::Ignored(_)) if d.is_empty()));
        let mut big = data.clone();
        big.resize(MAX_CACHE_BYTES as usize + 1, 0);
        std::fs::write(&f.path, &big).unwrap();
        assert!(
            matches!(f.load(), (d, CacheState::Ignored(w)) if d.is_empty() && w.contains("larger"))
        );
        assert!(!f.save(&big, &[]), "too large to write");
    }

    #[test]
    fn an_unwritable_folder_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the folder should be: the folder cannot be made.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let f = PipelineCacheFile::new(&blocked.join("gpucarve"), key());
        assert!(!f.save(&header(&key(), 32, 1), &[]));
        assert!(!blocked.join("gpucarve").exists());
    }

    #[test]
    fn the_folder_follows_xdg() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            cache_dir_from(env(&[("XDG_CACHE_HOME", "/x/c"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/c/gpucarve"))
        );
        assert_eq!(
            cache_dir_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/gpucarve"))
        );
        assert_eq!(cache_dir_from(env(&[("HOME", "/")])), None);
        assert_eq!(cache_dir_from(env(&[])), None);
    }
}
