//! A FUSE mount that serves an image with bad sectors (reads touching chosen
//! ranges fail with `EIO`), through the real kernel path: `tests/fuse/badsectors.py`
//! (python3-fuse, fuse3). Also logs every open's flags.
//!
//! [`BadFs::mount`] returns `None` with a printed reason when FUSE cannot be
//! used here, and panics instead when `GPUCARVE_REQUIRE_FUSE=1` (CI).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct BadFs {
    pub mountpoint: PathBuf,
    pub log: PathBuf,
    child: Child,
    name: String,
}

impl BadFs {
    /// Serves `backing` as `MOUNTPOINT/image` (mountpoint inside `dir`), with
    /// reads that touch any of `bad` (`[start, end)`) failing with EIO.
    pub fn mount(backing: &Path, bad: &[(u64, u64)], dir: &Path) -> Option<BadFs> {
        Self::mount_as(backing, "image", &[], bad, dir)
    }

    /// [`BadFs::mount`], serving `backing` as `MOUNTPOINT/NAME` and each of
    /// `also` (name, file) beside it as it is (a split set's other segments).
    #[allow(dead_code)]
    pub fn mount_as(
        backing: &Path,
        name: &str,
        also: &[(&str, &Path)],
        bad: &[(u64, u64)],
        dir: &Path,
    ) -> Option<BadFs> {
        match Self::try_mount(backing, name, also, bad, dir) {
            Ok(m) => Some(m),
            Err(why) => {
                if super::required("GPUCARVE_REQUIRE_FUSE") {
                    panic!("GPUCARVE_REQUIRE_FUSE=1 but FUSE cannot be used: {why}");
                }
                eprintln!("SKIPPED (not run): FUSE unavailable: {why}");
                None
            }
        }
    }

    fn try_mount(
        backing: &Path,
        name: &str,
        also: &[(&str, &Path)],
        bad: &[(u64, u64)],
        dir: &Path,
    ) -> Result<BadFs, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("no /dev/fuse".into());
        }
        // The Debian interpreter, where python3-fuse lives (not a virtualenv's).
        let python = ["/usr/bin/python3", "python3"]
            .into_iter()
            .find(|p| {
                Command::new(p)
                    .args(["-c", "import fuse"])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .ok_or("python3 with the fuse module (Debian python3-fuse) not found")?;
        let mountpoint = dir.join("mnt");
        std::fs::create_dir_all(&mountpoint).map_err(|e| e.to_string())?;
        let log = dir.join("opens.log");
        let ranges: Vec<String> = bad.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuse/badsectors.py");
        let stderr = dir.join("badsectors.stderr");
        let child = Command::new(python)
            .arg(&script)
            .arg(&mountpoint)
            .env("BADSECTORS_BACKING", backing)
            .env("BADSECTORS_RANGES", ranges.join(","))
            .env("BADSECTORS_LOG", &log)
            .env("BADSECTORS_NAME", name)
            .env(
                "BADSECTORS_ALSO",
                also.iter()
                    .map(|(n, p)| format!("{n}={}", p.display()))
                    .collect::<Vec<_>>()
                    .join(":"),
            )
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(&stderr)
                    .map(Stdio::from)
                    .unwrap_or(Stdio::null()),
            )
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", script.display()))?;
        let mut m = BadFs {
            mountpoint,
            log,
            child,
            name: name.to_string(),
        };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if m.image().exists() {
                return Ok(m);
            }
            if let Ok(Some(st)) = m.child.try_wait() {
                let err = std::fs::read_to_string(&stderr).unwrap_or_default();
                return Err(format!("badsectors.py exited ({st}): {}", err.trim()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("the FUSE mount did not appear within 20 s".into())
    }

    /// The served image (the file with the bad sectors).
    pub fn image(&self) -> PathBuf {
        self.mountpoint.join(&self.name)
    }

    /// The flags of every open of the image so far.
    pub fn opens(&self) -> Vec<i32> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("open ")?.trim().parse().ok())
            .collect()
    }

    /// Lines of the log that are not opens (write, truncate, utime attempts).
    pub fn other_calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with("open "))
            .map(String::from)
            .collect()
    }
}

impl Drop for BadFs {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
