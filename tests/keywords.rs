//! Keyword lists (`scan --keywords`): the list's syntax and errors through
//! the command line, and both engines against the brute-force oracle at
//! 10, 1 000 and 10 000 random 6-10 byte keywords (some matched without
//! case) over a few MiB with planted occurrences, block boundaries included.
//!
//! The GPU runs on whatever Vulkan device is present (llvmpipe included);
//! without one its tests print a note and pass, unless
//! `GPUCARVE_REQUIRE_GPU=1`, where a missing device fails them.

mod common;

use std::path::Path;

use gpucarve::catalogue::{Catalogue, CompiledSet, keywords};
use gpucarve::engine::cpu::CpuEngine;
use gpucarve::engine::gpu::{DeviceChoice, GpuConfig, GpuEngine, GpuError};
use gpucarve::engine::naive::NaiveEngine;
use gpucarve::engine::{Engine, Hit, pfac};
use serde_json::Value;

/// xorshift64*: the same data on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// `n` random keywords of 6-10 bytes: every other one binary (a `hex:`
/// line), the others lowercase letters and digits (a text line).
fn random_keywords(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|i| {
            let len = 6 + rng.below(5);
            (0..len)
                .map(|_| {
                    if i % 2 == 0 {
                        rng.next() as u8
                    } else {
                        ALNUM[rng.below(ALNUM.len())]
                    }
                })
                .collect()
        })
        .collect()
}

/// The keyword file's text for `words`, with a comment and a blank line.
fn keyword_file(words: &[Vec<u8>]) -> String {
    let mut s = String::from("# generated\n\n");
    for w in words {
        match std::str::from_utf8(w) {
            Ok(t) if w.iter().all(u8::is_ascii_alphanumeric) => s.push_str(t),
            _ => {
                s.push_str("hex:");
                for b in w {
                    s.push_str(&format!("{b:02x} "));
                }
            }
        }
        s.push('\n');
    }
    s
}

/// `len` random bytes with every keyword planted a few times (its letters
/// in random case when `ignore_case`), and keywords straddling every
/// multiple of `block` that fits.
fn planted(words: &[Vec<u8>], len: usize, block: usize, ignore_case: bool, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let put = |data: &mut Vec<u8>, rng: &mut Rng, w: &[u8], at: usize| {
        for (i, &b) in w.iter().enumerate() {
            data[at + i] = if ignore_case && rng.below(2) == 0 {
                b.to_ascii_uppercase()
            } else {
                b
            };
        }
    };
    let copies = (4000 / words.len()).clamp(1, 3);
    for w in words {
        for _ in 0..copies {
            let at = rng.below(len - w.len());
            put(&mut data, &mut rng, w, at);
        }
    }
    let mut edge = block;
    while edge + 16 < len {
        let w = &words[rng.below(words.len())];
        let at = edge - 1 - rng.below(w.len() - 1);
        put(&mut data, &mut rng, w, at);
        edge += block;
    }
    data
}

fn compiled(text: &str, ignore_case: bool) -> (Catalogue, CompiledSet) {
    let list = keywords::parse(text.as_bytes(), "kw.txt", ignore_case).unwrap();
    let cat = Catalogue::default().with_keywords(list);
    let set = cat.compile();
    (cat, set)
}

fn hits(e: &dyn Engine, hay: &[u8]) -> Vec<Hit> {
    let mut out = Vec::new();
    e.search(hay, &mut out).unwrap();
    out
}

fn require_gpu() -> bool {
    common::required("GPUCARVE_REQUIRE_GPU")
}

/// The GPU engine for `set` (state cap as `scan` sets it), or `None` with a
/// note when this machine has no Vulkan device.
fn gpu(set: &CompiledSet) -> Option<GpuEngine> {
    let config = GpuConfig {
        slots: 2,
        slot_bytes: 8 << 20,
        max_states: pfac::state_cap(&set.patterns),
        ..GpuConfig::default()
    };
    match GpuEngine::with_config(&set.patterns, DeviceChoice::Auto, true, config) {
        Ok(e) => Some(e),
        Err(e @ (GpuError::NoLoader | GpuError::NoDriver | GpuError::NoComputeDevice)) => {
            assert!(
                !require_gpu(),
                "GPUCARVE_REQUIRE_GPU=1 but no Vulkan device: {e}"
            );
            eprintln!("note: skipping GPU test: {e}");
            None
        }
        Err(e) => panic!("GPU engine setup failed: {e}"),
    }
}

/// The sizes and how many of each set match without case.
const SIZES: [(usize, bool); 4] = [(10, false), (1_000, false), (10_000, false), (1_000, true)];
const DATA: usize = 3 << 20;
const BLOCK: usize = 64 << 10;

fn each_set(mut check: impl FnMut(usize, bool, &CompiledSet, &[u8])) {
    for (n, ignore_case) in SIZES {
        let words = random_keywords(n, n as u64 + 7);
        let (_, set) = compiled(&keyword_file(&words), ignore_case);
        assert_eq!(set.patterns.len(), n, "random keywords are distinct");
        let data = planted(&words, DATA, BLOCK, ignore_case, n as u64);
        check(n, ignore_case, &set, &data);
    }
}

#[test]
fn cpu_engine_equals_oracle() {
    each_set(|n, ic, set, data| {
        let oracle = hits(&NaiveEngine::new(&set.patterns), data);
        assert!(oracle.len() >= n.min(4000), "{n}: planted keywords found");
        let cpu = hits(&CpuEngine::new(&set.patterns).unwrap(), data);
        assert!(
            cpu == oracle,
            "{n} ic={ic}: cpu {} hits, oracle {}",
            cpu.len(),
            oracle.len()
        );
    });
}

#[test]
fn gpu_engine_equals_oracle() {
    each_set(|n, ic, set, data| {
        let Some(g) = gpu(set) else { return };
        let oracle = hits(&NaiveEngine::new(&set.patterns), data);
        let got = hits(&g, data);
        assert!(
            got == oracle,
            "{n} ic={ic}: gpu {} hits, oracle {}",
            got.len(),
            oracle.len()
        );
    });
}

/// `scan IMAGE --keywords FILE`'s records as (offset, pattern text).
fn scan_records(image: &Path, list: &Path, extra: &[&str]) -> Vec<(u64, String)> {
    let mut args = vec![
        "scan",
        image.to_str().unwrap(),
        "--keywords",
        list.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    let o = common::run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["type"], "keyword");
            assert_eq!(v["role"], "keyword");
            (
                v["offset"].as_u64().unwrap(),
                v["pattern"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The pipeline (64 KiB blocks, keywords across every block boundary), as
/// the command line runs it, against the oracle over the whole image.
#[test]
fn scan_pipeline_equals_oracle_across_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let gpu_present = {
        let words = random_keywords(10, 1);
        gpu(&compiled(&keyword_file(&words), false).1).is_some()
    };
    for (n, ignore_case) in [(1_000, false), (10_000, false), (1_000, true)] {
        let words = random_keywords(n, n as u64 + 11);
        let text = keyword_file(&words);
        let (cat, set) = compiled(&text, ignore_case);
        let data = planted(&words, 1 << 20, BLOCK, ignore_case, n as u64 + 3);
        let image = dir.path().join("img.dd");
        let list = dir.path().join("kw.txt");
        std::fs::write(&image, &data).unwrap();
        std::fs::write(&list, &text).unwrap();
        let want: Vec<(u64, String)> = hits(&NaiveEngine::new(&set.patterns), &data)
            .iter()
            .map(|h| {
                let o = set.origins[h.pattern as usize];
                (h.pos as u64, cat.signature(o).text.clone())
            })
            .collect();
        let mut engines = vec!["cpu"];
        if gpu_present && n <= 1_000 {
            engines.push("gpu");
        }
        for engine in engines {
            let mut extra = vec!["--block-size", "64KiB", "--engine", engine];
            if ignore_case {
                extra.push("--ignore-case");
            }
            let got = scan_records(&image, &list, &extra);
            assert!(
                got == want,
                "{n} {engine}: {} records, oracle {}",
                got.len(),
                want.len()
            );
        }
    }
}

#[test]
fn cli_keyword_file_records_and_dedupe() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("img.dd");
    let mut data = vec![0u8; 8192];
    data[100..105].copy_from_slice(b"alice");
    data[200..204].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
    data[300..304].copy_from_slice(b"#tag");
    data[400..405].copy_from_slice(b"ALICE");
    data[4094..4099].copy_from_slice(b"alice");
    // A JPEG header: found only when --types asks for catalogue types.
    data[6000..6004].copy_from_slice(&[0xFF, 0xD8, 0xFF, 0xE0]);
    std::fs::write(&image, &data).unwrap();
    let list = dir.path().join("kw.txt");
    std::fs::write(
        &list,
        "# people\nalice\r\n\nhex:de ad BE EF\nalice\n\\#tag\nnobody\n",
    )
    .unwrap();
    let got = scan_records(&image, &list, &["--block-size", "4KiB"]);
    let want: Vec<(u64, String)> = [
        (100, "alice"),
        (200, "hex:DEADBEEF"),
        (300, "\\#tag"),
        (4094, "alice"),
    ]
    .iter()
    .map(|(o, t)| (*o, t.to_string()))
    .collect();
    assert_eq!(got, want);
    // Without case, ALICE too.
    let got = scan_records(&image, &list, &["--ignore-case"]);
    assert_eq!(got.iter().filter(|r| r.1 == "alice").count(), 3);
    // CSV and --count.
    let o = common::run(&[
        "scan",
        image.to_str().unwrap(),
        "--keywords",
        list.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    let csv = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        csv.starts_with("offset,type,role,pattern\n100,keyword,keyword,alice\n"),
        "{csv}"
    );
    assert!(
        csv.contains("\n200,keyword,keyword,hex:DEADBEEF\n"),
        "{csv}"
    );
    let o = common::run(&[
        "scan",
        image.to_str().unwrap(),
        "--keywords",
        list.to_str().unwrap(),
        "--count",
        "--format",
        "csv",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "type,role,count\nkeyword,keyword,4\n"
    );
    // With --types, the catalogue's types too.
    let o = common::run(&[
        "scan",
        image.to_str().unwrap(),
        "--keywords",
        list.to_str().unwrap(),
        "--types",
        "jpeg",
        "--count",
        "--format",
        "csv",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("jpeg,header,1\n") && out.contains("keyword,keyword,4\n"),
        "{out}"
    );
}

#[test]
fn cli_bad_keyword_lines_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("img.dd");
    std::fs::write(&image, vec![0u8; 4096]).unwrap();
    let cases: [(&str, String); 5] = [
        ("ok\nhex:DEADBEE\n", "kw.txt:2: bad hex".into()),
        ("ok\n# c\nhex:\n", "kw.txt:3: empty keyword".into()),
        (
            "\n\n\nxx\n",
            "kw.txt:4: keyword of 1025 bytes is longer than the longest pattern".into(),
        ),
        (
            "# nothing\n",
            "kw.txt: the keyword list holds no keyword".into(),
        ),
        ("\\\n", "kw.txt:1: empty keyword".into()),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let list = dir.path().join("kw.txt");
        let text = if i == 2 {
            format!("\n\n\n{}\n", "x".repeat(1025))
        } else {
            text.to_string()
        };
        std::fs::write(&list, &text).unwrap();
        let o = common::run(&[
            "scan",
            image.to_str().unwrap(),
            "--keywords",
            list.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success(), "{want}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want.as_str()), "{err} lacks {want}");
    }
    let o = common::run(&["scan", image.to_str().unwrap(), "--ignore-case"]);
    assert!(!o.status.success(), "--ignore-case needs --keywords");
}

/// 100 000 keywords: the list loads and the CPU engine builds (linear
/// loading; the timings are in BENCHMARKS.md), and the scan pipeline's
/// table fits `pfac::state_cap`.
#[test]
fn a_hundred_thousand_keywords_load_and_build() {
    let words = random_keywords(100_000, 5);
    let text = keyword_file(&words);
    let t = std::time::Instant::now();
    let (_, set) = compiled(&text, false);
    let loaded = t.elapsed();
    let cpu = CpuEngine::new(&set.patterns).unwrap();
    eprintln!(
        "100 000 keywords: loaded in {loaded:?}, CPU engine built in {:?}",
        t.elapsed() - loaded
    );
    let data = planted(&words[..1000], 1 << 20, BLOCK, false, 9);
    let found = hits(&cpu, &data);
    assert!(found.len() >= 1000);
    assert!(pfac::state_cap(&set.patterns) > 700_000);
}

#[test]
fn keyword_counts_are_capped() {
    // A list of unique keywords past the cap stops at the cap's line.
    let max = keywords::MAX_KEYWORDS;
    let mut text = String::with_capacity((max + 1) * 8);
    for i in 0..=max {
        text.push_str(&format!("k{i:07}\n"));
    }
    let err = keywords::parse(text.as_bytes(), "big.txt", false).unwrap_err();
    assert_eq!(
        err,
        format!(
            "big.txt:{}: more than {max} keywords; split the list",
            max + 1
        )
    );
}
