//! PFAC table (to come).
