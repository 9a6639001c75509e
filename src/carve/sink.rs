//! Where the carver sends what it found: a [`CarveReport`] receives each
//! carved file in offset order (the report writers in [`crate::report`]
//! implement it; the carver knows only this trait).

use super::{CarvedFile, Checkpoint};

/// Receives carved files one by one, in offset order.
pub trait CarveReport {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()>;
    /// Everything before `cp.frontier` has been reported (resume journal).
    fn checkpoint(&mut self, _cp: &Checkpoint) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends every file to several reports.
pub struct Fanout<'a> {
    pub reports: Vec<&'a mut (dyn CarveReport + Send)>,
}

impl CarveReport for Fanout<'_> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        for r in &mut self.reports {
            r.file(f)?;
        }
        Ok(())
    }
    fn checkpoint(&mut self, cp: &Checkpoint) -> std::io::Result<()> {
        for r in &mut self.reports {
            r.checkpoint(cp)?;
        }
        Ok(())
    }
}
