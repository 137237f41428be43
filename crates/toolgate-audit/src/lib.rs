//! Tamper-evident, privacy-preserving audit records for toolgate.
