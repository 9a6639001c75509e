//! The `gpucarve scan` output: one record per match, ascending offset.
//!
//! JSON Lines: `{"offset":1024,"type":"jpeg","role":"header","pattern":"FF D8 FF"}`
//! (`start` is added when a header sits at a fixed distance from the file's
//! first byte, e.g. MP4's `ftyp` at +4). CSV: `offset,type,role,pattern`.

use std::collections::BTreeMap;
use std::io::Write;

use crate::catalogue::{Catalogue, CompiledSet, Role};
use crate::scan::Match;

/// Output format of `scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchFormat {
    Jsonl,
    Csv,
}

/// Writes matches as they stream in, or counts them.
pub struct MatchWriter<'a, W: Write> {
    out: W,
    catalogue: &'a Catalogue,
    set: &'a CompiledSet,
    format: MatchFormat,
    /// (type, role) → count, when counting instead of listing.
    counts: Option<BTreeMap<(usize, Role), u64>>,
    line: String,
}

impl<'a, W: Write> MatchWriter<'a, W> {
    pub fn new(
        out: W,
        catalogue: &'a Catalogue,
        set: &'a CompiledSet,
        format: MatchFormat,
        count_only: bool,
    ) -> Self {
        let mut w = MatchWriter {
            out,
            catalogue,
            set,
            format,
            counts: count_only.then(BTreeMap::new),
            line: String::new(),
        };
        if format == MatchFormat::Csv && !count_only {
            w.line.push_str("offset,type,role,pattern\n");
        }
        w
    }

    /// Adds matches (in offset order).
    pub fn write(&mut self, matches: &[Match]) -> std::io::Result<()> {
        use std::fmt::Write as _;
        for m in matches {
            let o = self.set.origins[m.pattern as usize];
            if let Some(c) = &mut self.counts {
                *c.entry((o.type_index, o.role)).or_insert(0) += 1;
                continue;
            }
            let t = &self.catalogue.types[o.type_index];
            let sig = self.catalogue.signature(o);
            match self.format {
                MatchFormat::Jsonl => {
                    let _ = write!(
                        self.line,
                        "{{\"offset\":{},\"type\":{},\"role\":\"{}\",\"pattern\":{}",
                        m.offset,
                        json_str(&t.name),
                        o.role.as_str(),
                        json_str(&sig.text)
                    );
                    if o.role == Role::Header && sig.offset > 0 {
                        match m.offset.checked_sub(sig.offset) {
                            Some(start) => {
                                let _ = write!(self.line, ",\"start\":{start}");
                            }
                            None => self.line.push_str(",\"start\":null"),
                        }
                    }
                    self.line.push_str("}\n");
                }
                MatchFormat::Csv => {
                    let _ = writeln!(
                        self.line,
                        "{},{},{},{}",
                        m.offset,
                        csv_field(&t.name),
                        o.role.as_str(),
                        csv_field(&sig.text)
                    );
                }
            }
            if self.line.len() > 1 << 16 {
                self.out.write_all(self.line.as_bytes())?;
                self.line.clear();
            }
        }
        Ok(())
    }

    /// Flushes; for `--count`, writes the table (type, role, count), sorted by type then role.
    pub fn finish(mut self) -> std::io::Result<W> {
        use std::fmt::Write as _;
        if let Some(counts) = self.counts.take() {
            let mut rows: Vec<(&str, &str, u64)> = counts
                .iter()
                .map(|(&(ti, role), &n)| (self.catalogue.types[ti].name.as_str(), role.as_str(), n))
                .collect();
            rows.sort();
            match self.format {
                MatchFormat::Csv => {
                    self.line.push_str("type,role,count\n");
                    for (t, r, n) in &rows {
                        let _ = writeln!(self.line, "{t},{r},{n}");
                    }
                }
                MatchFormat::Jsonl => {
                    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
                    let _ = writeln!(self.line, "{:<w$}  {:<6}  {:>12}", "type", "role", "count");
                    let mut total = 0;
                    for (t, r, n) in &rows {
                        let _ = writeln!(self.line, "{t:<w$}  {r:<6}  {n:>12}");
                        total += n;
                    }
                    let _ = writeln!(self.line, "{:<w$}  {:<6}  {total:>12}", "total", "");
                }
            }
        }
        self.out.write_all(self.line.as_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
