//! Internet checksum helpers (RFC 1071) and incremental update (RFC 1624).
