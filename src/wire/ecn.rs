//! CE marking: ECT → CE in IPv4 (incremental header checksum) and IPv6.
