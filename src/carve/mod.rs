//! Carving: turning header candidates into files (format structure validators).

pub mod validators;
