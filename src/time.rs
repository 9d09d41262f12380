//! PLACEHOLDER: time value parsing (helper-owned).
