//! A read-only memory map of a raw image for random reads (the validators,
//! the fragment searches, the writer), safe against unreadable pages.
//!
//! Reading a mapped page the kernel cannot read (a bad sector, a file cut
//! short underneath) raises `SIGBUS`, which would end the process. So a
//! handler is installed once: a `SIGBUS` at an address inside a registered
//! map replaces that page with zeros (the access then completes) and counts
//! a fault against the map; any other `SIGBUS` goes to the handler that was
//! there before (Rust's stack-overflow check, or the default action). A read
//! during which its map counted a fault is not used: the caller reads the
//! bytes the ordinary way (`pread`, which reports the bad sectors as the
//! rest of the program expects), and so does every later read of that map.
//! Until a fault, the bytes are the page cache's, the same a `pread` returns.
//!
//! The handler is installed once per process, the first time a map is made,
//! and passes on what is not its own; a program embedding this library that
//! installs a SIGBUS handler of its own afterwards must likewise pass on what
//! is not its own, or an unreadable page under a map ends the process.
//!
//! The scan does not read through here: it reads blocks with the `--io`
//! backend chosen. Mapped pages the reads have touched count towards the
//! process's resident memory (clean file pages, which the kernel may drop at
//! any time); they are let go once [`RELEASE_EVERY`] bytes of them may be
//! resident (counted in the 64 KiB windows a fault maps), so what is
//! resident stays bounded whatever the image size.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bytes of the map made resident (counted in fault-around windows) between
/// two releases of its pages.
pub const RELEASE_EVERY: u64 = 32 << 20;

/// The pages a fault maps around the one asked for, aligned (Linux's
/// `fault_around_bytes`, 64 KiB by default): what a read is counted as
/// having made resident, window by window.
const FAULT_AROUND: usize = 64 << 10;

/// Largest medium mapped (its window bitmap is then 32 MiB); larger ones
/// are read the ordinary way.
const MAX_MAPPED: u64 = 16 << 40;

/// Registered maps, at most this many at once (one per raw image open).
const SLOTS: usize = 64;

/// One registered map: its address range and the faults counted in it.
struct Region {
    start: AtomicUsize,
    end: AtomicUsize,
    faults: AtomicU64,
}

static REGIONS: [Region; SLOTS] = [const {
    Region {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        faults: AtomicU64::new(0),
    }
}; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(0);
/// The `SIGBUS` action before ours, for faults that are not ours.
static PREVIOUS: std::sync::OnceLock<Previous> = std::sync::OnceLock::new();
static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

struct Previous(libc::sigaction);
// SAFETY: a plain C struct (a handler address, flags, a signal mask), only
// read after it is set.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}

/// A raw image mapped read-only, registered with the `SIGBUS` handler.
pub struct GuardedMap {
    map: memmap2::Mmap,
    slot: usize,
    /// One bit per fault-around window of the map's addresses: set once a
    /// read has touched it since the last release.
    windows: Box<[AtomicU64]>,
    /// Bytes of the windows set.
    mapped: AtomicU64,
    /// [`RELEASE_EVERY`] (smaller in tests).
    release_every: u64,
}

impl std::fmt::Debug for GuardedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GuardedMap({} bytes, slot {})",
            self.map.len(),
            self.slot
        )
    }
}

impl GuardedMap {
    /// Maps `len` bytes of `file`; `None` where that is not possible (not
    /// Linux, a medium that cannot be mapped, no free slot, the handler
    /// could not be installed): the caller reads the ordinary way.
    pub fn new(file: &std::fs::File, len: u64) -> Option<GuardedMap> {
        if !cfg!(target_os = "linux") || len == 0 || !install() {
            return None;
        }
        if len > MAX_MAPPED {
            return None;
        }
        let len = usize::try_from(len).ok()?;
        // SAFETY: a read-only private mapping of evidence, which nothing
        // writes during an examination; a page that cannot be read (a bad
        // sector, a file cut short) is replaced with zeros by the SIGBUS
        // handler and the read that saw it is discarded (`read`).
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.ok()?;
        let start = map.as_ptr() as usize;
        let end = start.checked_add(len)?;
        for (slot, r) in REGIONS.iter().enumerate() {
            if r.start
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                r.faults.store(0, Ordering::SeqCst);
                r.end.store(end, Ordering::SeqCst);
                let n = end.div_ceil(FAULT_AROUND) - start / FAULT_AROUND;
                return Some(GuardedMap {
                    map,
                    slot,
                    windows: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
                    mapped: AtomicU64::new(0),
                    release_every: RELEASE_EVERY,
                });
            }
        }
        None
    }

    /// Mapped bytes.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// True for a map of no bytes (never: empty media are not mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Faults counted in this map: pages that could not be read.
    pub fn faults(&self) -> u64 {
        REGIONS[self.slot].faults.load(Ordering::SeqCst)
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`; false (and `buf`
    /// to be ignored) when they are not all inside the map or when the map
    /// has counted a fault: the caller reads them the ordinary way.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Some(src) = usize::try_from(offset)
            .ok()
            .and_then(|o| self.map.get(o..o.checked_add(buf.len())?))
        else {
            return false;
        };
        if self.faults() != 0 {
            return false;
        }
        buf.copy_from_slice(src);
        // (A page replaced by another thread's fault was counted before it
        // was replaced: seen here if its zeros were copied.)
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.faults() != 0 {
            return false;
        }
        self.note(src.as_ptr() as usize, src.len());
        true
    }

    /// Marks the fault-around windows `[addr, addr + len)` lies in as mapped,
    /// and lets go of every page of the map once the windows newly marked
    /// since the last time reach [`RELEASE_EVERY`] bytes.
    fn note(&self, addr: usize, len: usize) {
        let base = self.map.as_ptr() as usize / FAULT_AROUND;
        let (first, last) = (addr / FAULT_AROUND, (addr + len.max(1) - 1) / FAULT_AROUND);
        let mut new = 0u64;
        for w in first - base..=last - base {
            let (Some(word), bit) = (self.windows.get(w / 64), 1u64 << (w % 64)) else {
                continue;
            };
            if word.load(Ordering::Relaxed) & bit == 0
                && word.fetch_or(bit, Ordering::Relaxed) & bit == 0
            {
                new += FAULT_AROUND as u64;
            }
        }
        if new == 0 {
            return;
        }
        let before = self.mapped.fetch_add(new, Ordering::Relaxed);
        if before < self.release_every && before + new >= self.release_every {
            for word in self.windows.iter() {
                word.store(0, Ordering::Relaxed);
            }
            self.mapped.store(0, Ordering::Relaxed);
            // SAFETY: dropping the map's page-table entries changes no byte
            // it reads (the page cache keeps them; the next read maps them
            // again; a replaced page is read from the file again).
            let _ = unsafe {
                self.map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
        }
    }
}

/// A medium's map, made on first use: what a [`super::Media`] over one
/// plain file holds to serve [`super::Media::read_mapped`].
#[derive(Debug, Default)]
pub struct LazyMap(std::sync::OnceLock<Option<GuardedMap>>);

impl LazyMap {
    /// The map of `len` bytes of `file`, made on the first call (`None`:
    /// it could not be, and will not be tried again).
    pub fn get(&self, file: &std::fs::File, len: u64) -> Option<&GuardedMap> {
        self.0.get_or_init(|| GuardedMap::new(file, len)).as_ref()
    }

    /// Faults counted in the map; 0 when none was made.
    pub fn faults(&self) -> u64 {
        self.0
            .get()
            .and_then(Option::as_ref)
            .map_or(0, GuardedMap::faults)
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Unregistered before the map goes (a fault can only come from an
        // access, and nothing accesses it any more).
        let r = &REGIONS[self.slot];
        r.end.store(0, Ordering::SeqCst);
        r.start.store(0, Ordering::SeqCst);
    }
}

/// Installs the handler once; false where it could not be.
fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Ok(page) = usize::try_from(page) else {
            return false;
        };
        if !page.is_power_of_two() {
            return false;
        }
        PAGE.store(page, Ordering::SeqCst);
        // SAFETY: zeroed is a valid sigaction (no handler, no flags); the
        // calls only read and write these structs.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            if PREVIOUS.set(Previous(old)).is_err() {
                return false;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) == 0
        }
    })
}

/// The `SIGBUS` handler. Only async-signal-safe work: atomics, `mmap`,
/// `sigaction`, and the previous handler.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::SeqCst);
    for r in &REGIONS {
        let (start, end) = (r.start.load(Ordering::SeqCst), r.end.load(Ordering::SeqCst));
        if start == 0 || addr < start || addr >= end || page == 0 {
            continue;
        }
        // Counted before the page changes: a reader that copies the zeros
        // sees the count afterwards.
        r.faults.fetch_add(1, Ordering::SeqCst);
        // SAFETY: errno is this thread's; saved and restored around mmap,
        // which the interrupted code does not expect to change it.
        let errno = unsafe { *libc::__errno_location() };
        // SAFETY: the page lies inside a live read-only mapping of ours
        // (registered until just before it is unmapped); replacing it with
        // a private zero page changes only what that mapping reads.
        let zero = unsafe {
            libc::mmap(
                (addr & !(page - 1)) as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
        if zero != libc::MAP_FAILED {
            return;
        }
        break;
    }
    previous(sig, info, ctx);
}

/// A `SIGBUS` that is not ours: the handler there before ours, or the
/// default action (restored; the access faults again and ends the process
/// as it would have without us).
fn previous(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if let Some(Previous(old)) = PREVIOUS.get()
        && old.sa_sigaction != libc::SIG_DFL
        && old.sa_sigaction != libc::SIG_IGN
    {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous handler was installed with SA_SIGINFO,
            // so it has this signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a handler installed without SA_SIGINFO takes the signal only.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig);
        }
        return;
    }
    // SAFETY: zeroed with SIG_DFL is the default action; sigaction is
    // async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        (f, data)
    }

    #[test]
    fn reads_equal_the_file() {
        let (f, data) = file_of(300_000);
        let m = GuardedMap::new(f.as_file(), data.len() as u64).expect("mapped");
        let mut rng = 12345u64;
        for _ in 0..2000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (rng >> 33) as usize % data.len();
            let n = ((rng >> 13) as usize % 70_000).min(data.len() - off);
            let mut buf = vec![0u8; n];
            assert!(m.read(off as u64, &mut buf));
            assert_eq!(buf, data[off..off + n]);
        }
        // Past the end: not read here.
        let mut buf = [0u8; 2];
        assert!(!m.read(data.len() as u64 - 1, &mut buf));
        assert_eq!(m.faults(), 0);
    }

    /// Resident pages are counted window by window, once each, and let go
    /// when they reach the bound; reads stay correct across a release.
    #[test]
    fn resident_windows_are_counted_and_released() {
        let (f, data) = file_of(40 * FAULT_AROUND + 123);
        let mut m = GuardedMap::new(f.as_file(), data.len() as u64).expect("mapped");
        m.release_every = 8 * FAULT_AROUND as u64;
        let windows = |m: &GuardedMap| -> u32 {
            m.windows
                .iter()
                .map(|w| w.load(Ordering::SeqCst).count_ones())
                .sum()
        };
        let mut b = vec![0u8; 10];
        // The same window twice: counted once (one or two windows, as the
        // map's start falls).
        assert!(m.read(100, &mut b));
        assert!(m.read(200, &mut b));
        let one = windows(&m);
        assert!((1..=2).contains(&one), "{one}");
        assert_eq!(
            m.mapped.load(Ordering::SeqCst),
            u64::from(one) * FAULT_AROUND as u64
        );
        // Reads over the bound: released (the count starts again).
        let mut big = vec![0u8; 6 * FAULT_AROUND];
        for k in 0..6 {
            let off = k * 6 * FAULT_AROUND;
            let n = big.len().min(data.len() - off);
            assert!(m.read(off as u64, &mut big[..n]));
            assert_eq!(big[..n], data[off..off + n]);
            assert!(m.mapped.load(Ordering::SeqCst) < m.release_every);
        }
        // (36 windows were read: without releases the count would be past the bound.)
        assert_eq!(
            u64::from(windows(&m)) * FAULT_AROUND as u64,
            m.mapped.load(Ordering::SeqCst)
        );
    }

    /// A page that cannot be read (here: the file was cut short under the
    /// map) raises SIGBUS; the handler counts it and the read says so, the
    /// process goes on, and every later read of that map is refused.
    #[test]
    fn an_unreadable_page_is_a_refused_read_not_a_crash() {
        let (f, data) = file_of(64 * 1024);
        let m = GuardedMap::new(f.as_file(), data.len() as u64).expect("mapped");
        let mut buf = vec![0u8; 4096];
        assert!(m.read(8192, &mut buf));
        assert_eq!(buf, data[8192..12288]);
        f.as_file().set_len(16 * 1024).unwrap();
        let mut far = vec![1u8; 8192];
        assert!(!m.read(40 * 1024, &mut far));
        assert!(m.faults() >= 1);
        // Readable bytes too are refused now: the caller reads them itself.
        assert!(!m.read(0, &mut buf));
        // Another map is not affected.
        let (g, gdata) = file_of(20_000);
        let n = GuardedMap::new(g.as_file(), gdata.len() as u64).expect("mapped");
        let mut b = vec![0u8; 100];
        assert!(n.read(500, &mut b));
        assert_eq!(b, gdata[500..600]);
    }
}
